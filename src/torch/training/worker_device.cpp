#include "sparsgd/torch/worker_device.hpp"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include <torch/cuda.h>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

namespace {

// The N of cuda:N; nothing for a bare cuda. Throws for anything else.
std::optional<int> gpu_index(const std::string& device) {
  if (device == "cuda") return std::nullopt;
  const std::string prefix = "cuda:";
  int index = -1;
  const char* begin = device.data() + prefix.size();
  const char* end = device.data() + device.size();
  const bool digits = device.rfind(prefix, 0) == 0 && begin != end &&
                      std::from_chars(begin, end, index).ptr == end && index >= 0;
  if (!digits) throw InvalidArgument("--device must be cpu, cuda or cuda:N, got '" + device + "'");
  return index;
}

int local_rank(int rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* value = std::getenv(name)) {
      int local = -1;
      const std::string text(value);
      if (std::from_chars(text.data(), text.data() + text.size(), local).ptr == text.data() + text.size() && local >= 0) {
        return local;
      }
    }
  }
  return rank;
}

}  // namespace

void check_device(const std::string& device) {
  if (device == "cpu") return;
  const std::optional<int> index = gpu_index(device);
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) throw InvalidArgument("--device " + device + ": no CUDA GPU is visible to this process (use --device cpu)");
  if (index && *index >= count) {
    throw InvalidArgument("--device " + device + ": this process sees " + std::to_string(count) + " CUDA GPU" +
                          (count == 1 ? "" : "s") + " (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
  }
}

torch::Device worker_device(const std::string& device, int rank) {
  if (device == "cpu") return torch::kCPU;
  check_device(device);
  const std::optional<int> index = gpu_index(device);
  const auto count = static_cast<int>(torch::cuda::device_count());
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index ? *index : local_rank(rank) % count)};
}

}  // namespace sparsgd::torch_layer
