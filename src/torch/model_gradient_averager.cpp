#include "sparsgd/torch/model_gradient_averager.hpp"

#include "sparsgd/collectives/small_collectives.hpp"

namespace sparsgd::torch_layer {

ModelGradientAverager::ModelGradientAverager(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                                           std::vector<std::string> names, const ModelAveragerConfig& config)
    : transport_(transport),
      flat_(std::move(parameters)),
      averager_(transport, flat_.layer_ranges(), std::move(names), config.exchange, config.per_layer,
                config.skip_nonfinite),
      gradient_(flat_.size()),
      average_(flat_.size()) {}

StepStats ModelGradientAverager::synchronize(std::uint64_t iteration) {
  flat_.gather_gradients(gradient_);
  if (StepStats skipped = averager_.check_finite(gradient_, iteration); skipped.skipped) return skipped;
  const StepStats stats = averager_.average(gradient_, average_, iteration);
  flat_.scatter_gradients(average_);
  return stats;
}

void ModelGradientAverager::broadcast_parameters() {
  std::vector<float> values(flat_.size());
  flat_.gather_values(values);
  collectives::broadcast(transport_, values, 0);
  flat_.scatter_values(values);
}

}  // namespace sparsgd::torch_layer
