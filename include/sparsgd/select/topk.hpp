#pragma once
// Exact top-k by magnitude: exactly k entries, the k largest |x|, ties broken by lower index,
// returned as ascending indices with their values.
//
// Strategy (chosen by n and k):
// - k == n: everything.
// - small n or high density: nth_element over a copy of the keys, then one emission pass.
// - otherwise: a strided sample brackets the k-th magnitude from below, one vectorized filter pass
//   keeps the few entries above the bracket (and counts ties at it), and the exact threshold is
//   found among those candidates. About one read pass of the data in total.
// - if the sample misjudged (too few or too many candidates): an exact radix (histogram) select
//   over the key bits, then an emission pass. Always exact, only slower.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::select {

enum class TopkPath { empty, all, small, sampled, sampled_tie, radix };
const char* to_string(TopkPath path);

struct TopkOptions {
  // Skip the sampled path and use the radix select (for tests and benchmarks of the fallback).
  bool force_radix = false;
};

// Scratch buffers reused across calls so that steady-state selection allocates nothing.
struct TopkWorkspace {
  std::vector<std::uint32_t> candidate_indices;
  std::vector<float> candidate_values;
  std::vector<std::uint32_t> keys;
  std::vector<std::uint32_t> tie_indices;
};

// Writes the top-k of x into out_indices[0..k) and out_values[0..k). Throws InvalidArgument if
// k > x.size(), k == 0 with a non-empty x, or the outputs are shorter than k; InvalidData if x holds
// NaN or Inf. Returns the path taken.
TopkPath topk(std::span<const float> x, std::size_t k, std::span<std::uint32_t> out_indices,
              std::span<float> out_values, TopkWorkspace& workspace, const TopkOptions& options = {});

// Convenience form: resizes `out` to k entries and sets out.dim = x.size().
TopkPath topk(std::span<const float> x, std::size_t k, SparseVector& out, TopkWorkspace& workspace,
              const TopkOptions& options = {});

// The k-th largest magnitude key of x and how many entries have a strictly larger key, by a
// radix select over the key bits (three histogram passes). Requires 1 <= k <= x.size().
struct KthKey {
  std::uint32_t key = 0;
  std::size_t greater = 0;  // entries with a larger key
  std::size_t equal = 0;    // entries with this key (0 where unknown)
};
KthKey kth_largest_key_radix(std::span<const float> x, std::size_t k);

// The same over precomputed keys (< 2^31), for short arrays: a radix select whose 2048 bins span
// the keys' range, then the same over the threshold bin's keys (at most three levels). Returns the
// exact count of keys equal to the answer. `scratch` is reused between calls. Requires
// 1 <= k <= keys.size().
KthKey kth_largest_of_keys(std::span<const std::uint32_t> keys, std::size_t k, std::vector<std::uint32_t>& scratch);

// The same over the keys magnitude_key(v) + key_offset of the finite values of a and b together,
// made on the fly rather than stored (key_offset lets a caller reserve key values below it).
KthKey kth_largest_of_values(std::span<const float> a, std::span<const float> b, std::uint32_t key_offset,
                             std::size_t k, std::vector<std::uint32_t>& scratch);

}  // namespace sparsgd::select
