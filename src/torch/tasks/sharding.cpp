#include "sparsgd/torch/sharding.hpp"

#include <numeric>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"

namespace sparsgd::torch_layer {

std::vector<std::uint32_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  Rng rng(mix_seed(seed, 0xda7a, epoch));
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);  // Fisher-Yates
  return order;
}

std::pair<std::size_t, std::size_t> shard_range(std::size_t n, int workers, int rank) {
  SPARSGD_ENFORCE(workers >= 1 && rank >= 0 && rank < workers, "shard of rank " << rank << " among " << workers);
  const auto p = static_cast<std::size_t>(workers);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t base = n / p, extra = n % p;
  const std::size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

std::size_t iterations_per_epoch(std::size_t n, int workers, std::size_t batch_size) {
  SPARSGD_ENFORCE(batch_size >= 1, "batch size must be at least 1");
  const auto [begin, end] = shard_range(n, workers, 0);  // shard 0 is a largest one
  return (end - begin + batch_size - 1) / batch_size;
}

}  // namespace sparsgd::torch_layer
