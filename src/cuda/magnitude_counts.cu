#include "sparsgd/cuda/magnitude_counts.hpp"

#include <cub/block/block_reduce.cuh>

#include "cuda/check.hpp"
#include "cuda/grid.hpp"

namespace sparsgd::cuda {
namespace {

constexpr int kThreads = 256;

struct Totals {
  unsigned long long greater;
  unsigned long long equal;
  unsigned int max_key;
};

struct CountsOp {
  __device__ Totals operator()(const Totals& a, const Totals& b) const {
    return {a.greater + b.greater, a.equal + b.equal, a.max_key > b.max_key ? a.max_key : b.max_key};
  }
};

// A grid-stride pass: each thread counts its share, each block reduces (CUB), one atomic a block.
__global__ void magnitude_counts_kernel(const float* __restrict__ x, std::size_t n, std::uint32_t pivot, Totals* out) {
  Totals mine{0, 0, 0};
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint32_t key = __float_as_uint(x[i]) & 0x7FFFFFFFu;
    mine.greater += key > pivot;
    mine.equal += key == pivot;
    mine.max_key = key > mine.max_key ? key : mine.max_key;
  }
  using BlockReduce = cub::BlockReduce<Totals, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  const Totals block = BlockReduce(storage).Reduce(mine, CountsOp{});
  if (threadIdx.x == 0) {
    atomicAdd(&out->greater, block.greater);
    atomicAdd(&out->equal, block.equal);
    atomicMax(&out->max_key, block.max_key);
  }
}

}  // namespace

MagnitudeCounts magnitude_counts(const float* device_values, std::size_t n, std::uint32_t pivot, void* stream_handle) {
  MagnitudeCounts result;
  if (n == 0) return result;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  const int blocks = detail::grid_blocks(n, kThreads);

  Totals* totals = nullptr;
  SPARSGD_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&totals), sizeof(Totals), stream));
  Totals host{0, 0, 0};
  try {
    SPARSGD_CUDA_CHECK(cudaMemsetAsync(totals, 0, sizeof(Totals), stream));
    magnitude_counts_kernel<<<blocks, kThreads, 0, stream>>>(device_values, n, pivot, totals);
    SPARSGD_CUDA_CHECK(cudaGetLastError());
    SPARSGD_CUDA_CHECK(cudaMemcpyAsync(&host, totals, sizeof(Totals), cudaMemcpyDeviceToHost, stream));
    SPARSGD_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    cudaFreeAsync(totals, stream);
    throw;
  }
  SPARSGD_CUDA_CHECK(cudaFreeAsync(totals, stream));
  result.greater = host.greater;
  result.equal = host.equal;
  result.max_key = host.max_key;
  return result;
}

}  // namespace sparsgd::cuda
