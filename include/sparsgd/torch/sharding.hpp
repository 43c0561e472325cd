#pragma once
// Data-parallel sharding of a training set: every epoch a fresh permutation from (seed, epoch), the
// same on every worker, cut into P contiguous shards, so that each sample is seen exactly once per
// epoch by exactly one worker. Torch-free.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sparsgd::torch_layer {

std::vector<std::uint32_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

// [begin, end) of worker `rank`'s shard in the permutation; sizes differ by at most one.
std::pair<std::size_t, std::size_t> shard_range(std::size_t n, int workers, int rank);

// Iterations that every worker runs per epoch: enough batches for the largest shard (a worker
// whose shard is shorter has a short or empty last batch and still takes part in the exchange).
std::size_t iterations_per_epoch(std::size_t n, int workers, std::size_t batch_size);

}  // namespace sparsgd::torch_layer
