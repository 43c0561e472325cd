#include "sparsgd/torch/momentum_sgd.hpp"

#include <cmath>

#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {
const SgdConfig& validate_sgd(const SgdConfig& sgd) {
  SPARSGD_ENFORCE(std::isfinite(sgd.momentum) && sgd.momentum >= 0.0 && sgd.momentum < 1.0,
                  "momentum must be in [0, 1), got " << sgd.momentum);
  SPARSGD_ENFORCE(std::isfinite(sgd.weight_decay) && sgd.weight_decay >= 0.0,
                  "weight decay must be >= 0, got " << sgd.weight_decay);
  return sgd;
}

MomentumSgd::MomentumSgd(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                                           std::vector<std::string> names, const collectives::ExchangeConfig& exchange,
                                           const SgdConfig& sgd)
    : transport_(transport),
      flat_(std::move(parameters)),
      sgd_(validate_sgd(sgd)),
      averager_(transport, flat_.layer_ranges(), std::move(names), exchange, sgd.per_layer, sgd.skip_nonfinite,
                sgd.momentum_correction ? sgd.momentum : 0.0) {
  const std::size_t n = flat_.size();
  gradient_.resize(n);
  parameters_.resize(n);
  velocity_.assign(n, 0.0f);
  average_.resize(n);
}

void MomentumSgd::broadcast_parameters() {
  flat_.gather_values(parameters_);
  collectives::broadcast(transport_, parameters_, 0);
  flat_.scatter_values(parameters_);
}

StepStats MomentumSgd::step(std::uint64_t iteration, double lr) {
  SPARSGD_ENFORCE(std::isfinite(lr) && lr >= 0.0, "learning rate must be a finite number >= 0, got " << lr);
  flat_.gather_gradients(gradient_);
  if (StepStats skipped = averager_.check_finite(gradient_, iteration); skipped.skipped) return skipped;
  flat_.gather_values(parameters_);
  const std::size_t n = flat_.size();
  const auto mu = static_cast<float>(sgd_.momentum);
  const auto wd = static_cast<float>(sgd_.weight_decay);

  if (sgd_.momentum_correction) {
    // DGC adds the weight decay to the gradient before the worker's own momentum (the averager's).
    for (std::size_t i = 0; i < n; ++i) gradient_[i] += wd * parameters_[i];
  }
  const StepStats stats = averager_.average(gradient_, average_, iteration);

  const auto rate = static_cast<float>(lr);
  if (sgd_.momentum_correction) {
    for (std::size_t i = 0; i < n; ++i) parameters_[i] -= rate * average_[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const float d = average_[i] + wd * parameters_[i];
      velocity_[i] = mu * velocity_[i] + d;
      parameters_[i] -= rate * (sgd_.nesterov ? d + mu * velocity_[i] : velocity_[i]);
    }
  }
  flat_.scatter_values(parameters_);
  return stats;
}

}  // namespace sparsgd::torch_layer
