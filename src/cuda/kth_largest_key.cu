#include "sparsgd/cuda/kth_largest_key.hpp"

#include <array>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/grid.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBins = 2048;

struct Digit {
  int shift;
  std::uint32_t mask;
};
// Bits 30-20, 19-9, 8-0: keys are below 2^31 (the sign bit is cleared).
constexpr std::array<Digit, 3> kDigits{{{20, 0x7FFu}, {9, 0x7FFu}, {0, 0x1FFu}}};

// One pass: a block histogram in shared memory (a block counts fewer than 2^32 entries: n does),
// added to the global one with one atomic a non-empty bin.
__global__ void digit_histogram(const float* __restrict__ x, std::size_t n, std::uint32_t prefix_mask,
                                std::uint32_t prefix, int shift, std::uint32_t digit_mask,
                                unsigned long long* __restrict__ histogram) {
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint32_t key = __float_as_uint(x[i]) & 0x7FFFFFFFu;
    if ((key & prefix_mask) == prefix) atomicAdd(&local[(key >> shift) & digit_mask], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&histogram[b], static_cast<unsigned long long>(local[b]));
  }
}

}  // namespace

KthKey kth_largest_key(const float* device_values, std::size_t n, std::size_t k, void* stream_handle) {
  if (k < 1 || k > n) {
    throw InvalidArgument("kth_largest_key needs 1 <= k <= n, got k = " + std::to_string(k) + ", n = " +
                          std::to_string(n));
  }
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  const int blocks = detail::grid_blocks(n, kThreads);

  unsigned long long* histogram = nullptr;
  SPARSGD_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&histogram), kBins * sizeof(unsigned long long), stream));
  std::vector<unsigned long long> bins(kBins);
  KthKey result;
  try {
    std::uint32_t prefix = 0, prefix_mask = 0;
    std::size_t remaining = k;  // the rank of the answer among the entries that match the prefix
    for (const Digit& digit : kDigits) {
      SPARSGD_CUDA_CHECK(cudaMemsetAsync(histogram, 0, kBins * sizeof(unsigned long long), stream));
      digit_histogram<<<blocks, kThreads, 0, stream>>>(device_values, n, prefix_mask, prefix, digit.shift, digit.mask,
                                                        histogram);
      SPARSGD_CUDA_CHECK(cudaGetLastError());
      SPARSGD_CUDA_CHECK(cudaMemcpyAsync(bins.data(), histogram, kBins * sizeof(unsigned long long),
                                         cudaMemcpyDeviceToHost, stream));
      SPARSGD_CUDA_CHECK(cudaStreamSynchronize(stream));
      // From the largest digit down: the bin where the count above reaches the rank holds the answer.
      std::size_t above = 0;
      std::uint32_t chosen = 0;
      for (int b = static_cast<int>(digit.mask); b >= 0; --b) {
        if (above + bins[static_cast<std::size_t>(b)] >= remaining) {
          chosen = static_cast<std::uint32_t>(b);
          break;
        }
        above += bins[static_cast<std::size_t>(b)];
      }
      result.greater += above;
      remaining -= above;
      prefix |= chosen << digit.shift;
      prefix_mask |= digit.mask << digit.shift;
    }
    result.key = prefix;
  } catch (...) {
    cudaFreeAsync(histogram, stream);
    throw;
  }
  SPARSGD_CUDA_CHECK(cudaFreeAsync(histogram, stream));
  return result;
}

}  // namespace sparsgd::cuda
