#include "sparsgd/select/randk.hpp"

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"

namespace sparsgd::select {
namespace {

// Knuth's selection sampling (Algorithm S): one pass over [0, n), already in order. Best when k is
// a sizeable fraction of n.
void selection_sampling(std::size_t n, std::size_t k, Rng& rng, std::uint32_t* out) {
  std::size_t needed = k;
  std::size_t written = 0;
  for (std::size_t i = 0; i < n && needed > 0; ++i) {
    if (rng.below(n - i) < needed) {
      out[written++] = static_cast<std::uint32_t>(i);
      --needed;
    }
  }
}

// Floyd's algorithm over a bitmap, then a scan of the bitmap for ascending order: O(k) draws and
// O(n / 64) scan, for k much smaller than n.
void floyd_sampling(std::size_t n, std::size_t k, Rng& rng, std::uint32_t* out,
                    std::vector<std::uint64_t>& bitmap) {
  bitmap.assign((n + 63) / 64, 0);
  auto test_and_set = [&bitmap](std::size_t i) {
    std::uint64_t& word = bitmap[i / 64];
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    const bool was = (word & bit) != 0;
    word |= bit;
    return was;
  };
  for (std::size_t j = n - k; j < n; ++j) {
    const std::size_t t = rng.below(j + 1);
    if (test_and_set(t)) test_and_set(j);
  }
  std::size_t written = 0;
  for (std::size_t w = 0; w < bitmap.size(); ++w) {
    std::uint64_t word = bitmap[w];
    while (word != 0) {
      out[written++] = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(word)));
      word &= word - 1;
    }
  }
}

}  // namespace

void random_k_indices(std::size_t n, std::size_t k, std::uint64_t seed, std::span<std::uint32_t> out,
                      std::vector<std::uint64_t>& scratch) {
  validate_k(n, k);
  SPARSGD_ENFORCE_GE(out.size(), k, "random-k index output is too short");
  if (k == 0) return;
  Rng rng(seed);
  if (k * 16 >= n) {
    selection_sampling(n, k, rng, out.data());
  } else {
    floyd_sampling(n, k, rng, out.data(), scratch);
  }
}

}  // namespace sparsgd::select
