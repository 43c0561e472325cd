#include "run_checkpoint.hpp"

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

Checkpoint capture(const RunParts& parts, const std::string& fingerprint, const std::string& data_identity, int rank,
                   int workers) {
  Checkpoint ckpt;
  ckpt.texts["config"] = fingerprint;
  ckpt.texts["data"] = data_identity;
  // Whose state this is: a file copied or swapped to another rank must not resume silently.
  ckpt.integers["identity"] = {static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(workers)};
  std::vector<float> values(parts.optimizer.size());
  parts.optimizer.flat().gather_values(values);
  ckpt.floats["parameters"] = std::move(values);
  std::vector<float> buffers(parts.buffers.size());
  parts.buffers.gather_values(buffers);
  ckpt.floats["buffers"] = std::move(buffers);
  parts.optimizer.save(ckpt);
  parts.worker.save(ckpt);
  parts.state.save(ckpt);
  return ckpt;
}

void restore(const Checkpoint& ckpt, RunParts& parts) {
  const std::vector<float>& values = ckpt.float_section("parameters");
  if (values.size() != parts.optimizer.size()) {
    throw InvalidData("checkpoint parameters (" + std::to_string(values.size()) + ") do not fit the model (" +
                      std::to_string(parts.optimizer.size()) + ")");
  }
  parts.optimizer.flat().scatter_values(values);
  const std::vector<float>& buffers = ckpt.float_section("buffers");
  if (buffers.size() != parts.buffers.size()) throw InvalidData("checkpoint buffers do not fit the model");
  parts.buffers.scatter_values(buffers);
  parts.optimizer.load(ckpt);
  parts.worker.load(ckpt);
  parts.state.load(ckpt);
}

}  // namespace sparsgd::torch_layer
