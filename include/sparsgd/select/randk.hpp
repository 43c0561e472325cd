#pragma once
// Random-k: k distinct indices drawn uniformly from [0, n), reproducible from a seed, ascending.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparsgd::select {

// Writes k distinct uniform indices of [0, n) in ascending order into out[0..k). Every k-subset is
// equally likely. The same (n, k, seed) gives the same indices on every machine. Throws
// InvalidArgument unless 0 <= k <= n (k >= 1 when n > 0) and out.size() >= k.
// `scratch` is reused between calls (a bitmap of n bits for sparse draws).
void random_k_indices(std::size_t n, std::size_t k, std::uint64_t seed, std::span<std::uint32_t> out,
                      std::vector<std::uint64_t>& scratch);

}  // namespace sparsgd::select
