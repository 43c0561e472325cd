#pragma once
// A distributed optimizer for LibTorch modules in the spirit of Horovod's DistributedOptimizer:
// after backward it flattens the gradients into one buffer, compresses them with error feedback,
// aggregates them over the workers, divides by P, and steps SGD (momentum, Nesterov, weight
// decay) on identical parameters everywhere.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/torch/flat_gradients.hpp"
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

struct StepStats {
  double compress_cpu_seconds = 0.0;
  double aggregate_wall_seconds = 0.0;
  double aggregate_cpu_seconds = 0.0;
  double feedback_cpu_seconds = 0.0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_sent = 0;
  std::size_t selected = 0;  // entries this worker selected
  bool skipped = false;       // skip_nonfinite: some worker's gradient was not finite
  std::string skip_reason;    // what this worker saw, or which rank flagged the step
};

class DistributedOptimizer {
 public:
  // `names` label the parameters in error messages (same order as `parameters`).
  DistributedOptimizer(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                       std::vector<std::string> names, const collectives::ExchangeConfig& exchange,
                       const SgdConfig& sgd);

  // Rank 0's parameters to every worker (collective).
  void broadcast_parameters();
  // After loss.backward() on every worker: exchange, average and step with learning rate `lr`.
  // A gradient that holds NaN or Inf (found before anything is sent) throws InvalidData naming the
  // parameter, element, iteration and rank, or with skip_nonfinite skips the step on every worker.
  StepStats step(std::uint64_t iteration, double lr);
  // From the next step on (density warm-up).
  void set_density(double density);
  double density() const { return density_; }

  std::size_t size() const { return flat_.size(); }
  FlatParameters& flat() { return flat_; }

  // Checkpoint state: the (shared) velocity, this worker's own velocity (momentum correction) and
  // residuals (one per exchange: one, or one per layer).
  std::vector<float>& velocity() { return velocity_; }
  std::vector<float>& local_velocity() { return local_velocity_; }
  std::vector<std::vector<float>> residuals() const;
  void set_residuals(const std::vector<std::vector<float>>& residuals);

 private:
  // Empty if every gradient is finite, else where the first non-finite one is.
  std::string find_nonfinite_gradient(std::uint64_t iteration) const;

  transport::Transport& transport_;
  FlatParameters flat_;
  std::vector<std::string> names_;
  SgdConfig sgd_;
  double density_;
  std::vector<std::unique_ptr<collectives::GradientExchange>> exchanges_;  // one, or one per layer
  std::vector<std::pair<std::size_t, std::size_t>> exchange_ranges_;
  std::vector<float> gradient_, parameters_, velocity_, local_velocity_, average_;
};

}  // namespace sparsgd::torch_layer
