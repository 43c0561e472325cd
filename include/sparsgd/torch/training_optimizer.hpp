#pragma once
// What `sparsgd train` steps: the momentum SGD of the gTop-k paper (MomentumSgd: momentum,
// Nesterov, DGC's momentum correction) or a torch::optim optimizer (Adam, AdamW) stepping on the
// gradients that the ModelGradientAverager averaged. One interface, so that the loop and its
// checkpoints do not care which.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/momentum_sgd.hpp"
#include "sparsgd/torch/flat_parameters.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

class TrainingOptimizer {
 public:
  virtual ~TrainingOptimizer() = default;
  // After loss.backward() on every worker: exchange, average and step with learning rate `lr`.
  virtual StepStats step(std::uint64_t iteration, double lr) = 0;
  virtual void set_density(double density) = 0;
  virtual double density() const = 0;
  // The model's parameters as one flat buffer (broadcast, checkpoints).
  virtual FlatParameters& flat() = 0;
  std::size_t size() { return flat().size(); }
  // The optimizer's state and the residuals, as named checkpoint sections, and back (throws
  // InvalidData naming a missing or misfitting section).
  virtual void save(Checkpoint& checkpoint) const = 0;
  virtual void load(const Checkpoint& checkpoint) = 0;
  // Its exchanges' aggregators, for reports (what auto settled on).
  virtual std::vector<const collectives::Aggregator*> aggregators() const = 0;
};

// Parameters on a GPU take the device path (torch/device_gradient_averager.hpp: the averaging and
// the update stay on the GPU); device_path takes it for CPU parameters too (the same code, as the
// tests run it). The names make_training_optimizer accepts: sgd (momentum SGD as configured by `sgd`), adam,
// adamw (torch::optim, betas 0.9 and 0.999, weight decay from `sgd.weight_decay`; momentum,
// Nesterov and momentum correction belong to sgd and are refused with them).
const std::vector<std::string>& training_optimizer_names();

std::unique_ptr<TrainingOptimizer> make_training_optimizer(const std::string& name, transport::Transport& transport,
                                                           std::vector<torch::Tensor> parameters,
                                                           std::vector<std::string> names,
                                                           const collectives::ExchangeConfig& exchange,
                                                           const SgdConfig& sgd, bool device_path = false);

}  // namespace sparsgd::torch_layer
