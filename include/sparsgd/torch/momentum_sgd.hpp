#pragma once
// The momentum SGD of `sparsgd train`, built on the GradientAverager: after backward it flattens
// the gradients (or, with momentum correction, each worker's own velocity) into one buffer, has
// them averaged over the workers with error feedback, and steps SGD (momentum, Nesterov, weight
// decay) on identical parameters everywhere. Any other torch::optim optimizer steps on the
// ModelGradientAverager instead (model_gradient_averager.hpp).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/torch/flat_parameters.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

struct SgdConfig {
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  // DGC's momentum correction: each worker keeps its own velocity, and error feedback works on the
  // velocity rather than the gradient (with momentum factor masking of what was sent); the
  // aggregated velocity is then applied without further momentum.
  bool momentum_correction = false;
  // Compress and exchange each parameter tensor on its own (k per layer) instead of the whole
  // model at once.
  bool per_layer = false;
  // A non-finite gradient on any worker: false stops (throws), true makes every worker skip the
  // step (parameters, velocities and residuals untouched). Skipping costs an agreement of
  // 2 ceil(log2 P) small messages per step, so it is off unless asked for.
  bool skip_nonfinite = false;
};

// Throws InvalidArgument for a momentum outside [0, 1) or a negative weight decay; returns sgd.
const SgdConfig& validate_sgd(const SgdConfig& sgd);

class MomentumSgd {
 public:
  // `names` label the parameters in error messages (same order as `parameters`).
  MomentumSgd(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                       std::vector<std::string> names, const collectives::ExchangeConfig& exchange,
                       const SgdConfig& sgd);

  // Rank 0's parameters to every worker (collective).
  void broadcast_parameters();
  // After loss.backward() on every worker: exchange, average and step with learning rate `lr`.
  // A gradient that holds NaN or Inf (found before anything is sent) throws InvalidData naming the
  // parameter, element, iteration and rank, or with skip_nonfinite skips the step on every worker.
  StepStats step(std::uint64_t iteration, double lr);
  // From the next step on (density warm-up).
  void set_density(double density) { averager_.set_density(density); }
  double density() const { return averager_.density(); }
  const GradientAverager& averager() const { return averager_; }

  std::size_t size() const { return flat_.size(); }
  FlatParameters& flat() { return flat_; }

  // Checkpoint state: the (shared) velocity, this worker's own velocity (momentum correction) and
  // residuals (one per exchange: one, or one per layer).
  std::vector<float>& velocity() { return velocity_; }
  void set_local_velocity(const std::vector<float>& velocity) { averager_.set_local_velocity(velocity); }
  const std::vector<float>& velocity() const { return velocity_; }
  const std::vector<float>& local_velocity() const { return averager_.local_velocity(); }
  std::vector<std::vector<float>> residuals() const { return averager_.residuals(); }
  void set_residuals(const std::vector<std::vector<float>>& residuals) { averager_.set_residuals(residuals); }

 private:
  transport::Transport& transport_;
  FlatParameters flat_;
  SgdConfig sgd_;
  GradientAverager averager_;
  std::vector<float> gradient_, parameters_, velocity_, average_;
};

}  // namespace sparsgd::torch_layer
