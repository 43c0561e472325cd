#pragma once
// Gradient synchronization for any optimizer, in Horovod's shape: after loss.backward() on every
// worker, synchronize() exchanges the model's gradients (error feedback, compression, sparse
// aggregation, exact residual accounting) and writes the AVERAGE over the workers back into each
// parameter's .grad, so that any torch::optim optimizer (SGD, Adam, AdamW...) then steps on
// identical gradients everywhere. Whole-model selection (the gTop-k paper's setting) or one
// exchange per parameter tensor.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/torch/flat_parameters.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

struct ModelAveragerConfig {
  collectives::ExchangeConfig exchange;
  // One exchange per parameter tensor (k per tensor) instead of one over the whole model.
  bool per_layer = false;
  // A NaN or Inf gradient on any worker: false stops (throws InvalidData on that worker, naming the
  // parameter; nothing is sent), true makes every worker skip the step (gradients and residuals
  // untouched; the caller should not step its optimizer).
  bool skip_nonfinite = false;
};

class ModelGradientAverager {
 public:
  // `parameters`: float32 CPU tensors (module.parameters()), named by `names` in errors.
  ModelGradientAverager(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                       std::vector<std::string> names, const ModelAveragerConfig& config);

  // Collective: every worker calls it after backward. Overwrites every parameter's .grad with the
  // average (a parameter with no gradient takes part with zeros and gets one). A skipped step
  // (skip_nonfinite) leaves the gradients as they are and says so in the stats.
  StepStats synchronize(std::uint64_t iteration);
  // Rank 0's parameter values to every worker (collective), so that all start equal.
  void broadcast_parameters();

  std::size_t size() const { return flat_.size(); }
  FlatParameters& flat() { return flat_; }
  const FlatParameters& flat() const { return flat_; }
  GradientAverager& averager() { return averager_; }
  const GradientAverager& averager() const { return averager_; }

 private:
  transport::Transport& transport_;
  FlatParameters flat_;
  GradientAverager averager_;
  std::vector<float> gradient_, average_;
};

}  // namespace sparsgd::torch_layer
