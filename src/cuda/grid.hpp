#pragma once
// How many blocks a grid-stride pass over n entries launches: a few a multiprocessor keep the
// memory system busy; more would only add atomics.

#include <cstddef>

#include "cuda/check.hpp"

namespace sparsgd::cuda::detail {

inline int grid_blocks(std::size_t n, int threads) {
  int device = 0;
  int sms = 0;
  SPARSGD_CUDA_CHECK(cudaGetDevice(&device));
  SPARSGD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t wanted = (n + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<int>(wanted < static_cast<std::size_t>(4 * sms) ? wanted : 4 * sms);
}

}  // namespace sparsgd::cuda::detail
