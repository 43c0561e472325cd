#include "sparsgd/cuda/device.hpp"

#include <cuda_runtime_api.h>

namespace sparsgd::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // a failed query leaves a sticky error otherwise seen by the next call
    return 0;
  }
  return count;
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA driver or device: ") + cudaGetErrorString(status);
  }
  return count == 0 ? "no CUDA-capable device" : "";
}

}  // namespace sparsgd::cuda
