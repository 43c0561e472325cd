#include "sparsgd/core/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <hwy/contrib/sort/vqsort.h>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"

namespace sparsgd {

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> names = {"normal", "uniform", "constant", "sparse", "heavy"};
  return names;
}

Distribution parse_distribution(const std::string& name) {
  if (name == "normal") return Distribution::normal;
  if (name == "uniform") return Distribution::uniform;
  if (name == "constant") return Distribution::constant;
  if (name == "sparse") return Distribution::sparse;
  if (name == "heavy") return Distribution::heavy;
  throw InvalidArgument("unknown distribution '" + name +
                        "' (expected normal, uniform, constant, sparse or heavy)");
}

const char* to_string(Distribution distribution) {
  switch (distribution) {
    case Distribution::normal: return "normal";
    case Distribution::uniform: return "uniform";
    case Distribution::constant: return "constant";
    case Distribution::sparse: return "sparse";
    case Distribution::heavy: return "heavy";
  }
  return "?";
}

namespace {
float standard_normal(Rng& rng) {
  // Box-Muller; 1 - uniform() lies in (0, 1] so the log is finite.
  const double u1 = 1.0 - rng.uniform();
  const double u2 = rng.uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}
}  // namespace

void fill_synthetic(std::span<float> out, Distribution distribution, std::uint64_t seed) {
  Rng rng(mix_seed(seed, 0x5eed));
  switch (distribution) {
    case Distribution::normal:
      for (float& v : out) v = standard_normal(rng);
      break;
    case Distribution::uniform:
      for (float& v : out) v = static_cast<float>(2.0 * rng.uniform() - 1.0);
      break;
    case Distribution::constant:
      for (float& v : out) v = (rng.next() & 1) ? 0.5f : -0.5f;
      break;
    case Distribution::sparse:
      for (float& v : out) {
        const std::uint64_t r = rng.below(100);
        v = r == 0 ? standard_normal(rng) : ((rng.next() & 1) ? 0.0f : -0.0f);
      }
      break;
    case Distribution::heavy:
      for (float& v : out) {
        // tan of a uniform angle in (-pi/2, pi/2): standard Cauchy, always finite in float.
        const double u = (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53;
        v = static_cast<float>(std::tan(std::numbers::pi * (u - 0.5)));
      }
      break;
  }
}

}  // namespace sparsgd

namespace sparsgd {

namespace {

// fill_gradient's entry i of one worker and iteration.
struct GradientEntries {
  GradientEntries(std::uint64_t seed, int worker, std::uint64_t iteration)
      : key(mix_seed(seed, static_cast<std::uint64_t>(worker) + 1, iteration + 1)),
        shared_key(mix_seed(seed, 0, iteration + 1)),  // the same on every worker
        scale(1.0f + 0.25f * static_cast<float>(worker % 4)) {}

  float operator()(std::size_t i) const {
    constexpr float kUnit = 1.0f / 65536.0f;
    const std::uint64_t h = splitmix64(key ^ (i * 0x9e3779b97f4a7c15ULL));
    // Four 16-bit uniforms: their centred sum has variance 4/12, so scale by sqrt(3).
    const float s = static_cast<float>(h & 0xFFFF) + static_cast<float>((h >> 16) & 0xFFFF) +
                    static_cast<float>((h >> 32) & 0xFFFF) + static_cast<float>(h >> 48);
    float v = (s * kUnit - 2.0f) * 1.7320508f * scale;
    // Entries that are large on every worker this iteration: the shared part of the signal.
    if ((splitmix64(shared_key ^ i) & 0x3F) == 0) v *= 10.0f;
    return v;
  }

  std::uint64_t key, shared_key;
  float scale;
};

}  // namespace

void fill_gradient(std::span<float> out, std::uint64_t seed, int worker, std::uint64_t iteration) {
  const GradientEntries entry(seed, worker, iteration);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = entry(i);
}

void draw_selection(SparseVector& out, std::size_t n, std::size_t k, std::uint64_t seed, int worker,
                    std::uint64_t iteration, bool shared_indices) {
  SPARSGD_ENFORCE(k <= n, "draw_selection: k = " << k << " entries of n = " << n);
  SPARSGD_ENFORCE(n <= std::size_t{std::numeric_limits<std::uint32_t>::max()},
                  "draw_selection: n = " << n << " does not fit 32-bit indices");
  // Another stream than fill_gradient's keys (the last word tells them apart).
  Rng rng(mix_seed(seed, shared_indices ? 0 : static_cast<std::uint64_t>(worker) + 1, (iteration + 1) ^ 0x5e1ec7ULL));
  out.dim = n;
  out.indices.clear();
  if (k > n / 16) {
    // Dense enough that a bitmap of n bits is small beside the set: Floyd's algorithm, k draws.
    std::vector<bool> taken(n, false);
    for (std::size_t j = n - k; j < n; ++j) {
      const auto t = static_cast<std::size_t>(rng.below(j + 1));
      taken[taken[t] ? j : t] = true;
    }
    out.indices.reserve(k);
    for (std::size_t i = 0; i < n; ++i) {
      if (taken[i]) out.indices.push_back(static_cast<std::uint32_t>(i));
    }
  } else {
    // Sparse: draw, sort, drop repeats, draw again for what is missing (few rounds at k <= n / 16).
    // Highway's vectorized quicksort: the same order as std::sort (plain integer keys), in a fraction
    // of the time. With std::sort this sort took about 65% of a `bench comm --selections drawn` run
    // at P = 256, n = 25M, k = 250,000 (perf), where every worker draws anew each exchange.
    out.indices.reserve(k);
    const hwy::Sorter sorter;
    while (out.indices.size() < k) {
      for (std::size_t missing = k - out.indices.size(); missing > 0; --missing) {
        out.indices.push_back(static_cast<std::uint32_t>(rng.below(n)));
      }
      sorter(out.indices.data(), out.indices.size(), hwy::SortAscending());
      out.indices.erase(std::unique(out.indices.begin(), out.indices.end()), out.indices.end());
    }
  }
  const GradientEntries entry(seed, worker, iteration);
  out.values.resize(k);
  for (std::size_t e = 0; e < k; ++e) out.values[e] = entry(out.indices[e]);
}

}  // namespace sparsgd
