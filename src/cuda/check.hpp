#pragma once
// CUDA runtime calls that fail throw sparsgd::Error naming the call and CUDA's own message.

#include <cuda_runtime_api.h>

#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd::cuda::detail {

inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw Error(std::string("sparsgd: CUDA: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
}

}  // namespace sparsgd::cuda::detail

#define SPARSGD_CUDA_CHECK(call) ::sparsgd::cuda::detail::check((call), #call)
