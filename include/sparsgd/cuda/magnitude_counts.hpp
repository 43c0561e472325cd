#pragma once
// The counting half of select::filter_greater on a CUDA device: one read pass over n floats in
// device memory that counts magnitude keys above and equal to a pivot and finds the largest key.
// A radix or bracket selection of the exact top-k is built from such passes; its CPU twin is
// select::filter_greater with capacity 0, and the two agree on every input (keys compare as
// integers, so -0 and +0 tie and NaN and Inf count by their bit patterns).

#include <cstddef>
#include <cstdint>

namespace sparsgd::cuda {

struct MagnitudeCounts {
  std::size_t greater = 0;  // entries with magnitude key > pivot
  std::size_t equal = 0;    // entries with magnitude key == pivot
  std::uint32_t max_key = 0;
};

// device_values: n floats in memory of the current device. stream: a cudaStream_t, or nullptr for
// the default stream. Waits for the result. Throws sparsgd::Error with CUDA's message when a CUDA
// call fails (no device, a host pointer, ...).
MagnitudeCounts magnitude_counts(const float* device_values, std::size_t n, std::uint32_t pivot, void* stream = nullptr);

}  // namespace sparsgd::cuda
