#include "sparsgd/torch/device_gradient_averager.hpp"

#include <cmath>

#include <ATen/ATen.h>

#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::torch_layer {

DeviceGradientAverager::DeviceGradientAverager(transport::Transport& transport, Segments segments,
                                               std::vector<std::string> names,
                                               const collectives::ExchangeConfig& exchange, bool per_segment,
                                               bool skip_nonfinite, double momentum_correction,
                                               const torch::Device& device)
    : transport_(transport),
      segments_(std::move(segments)),
      names_(std::move(names)),
      skip_nonfinite_(skip_nonfinite),
      momentum_(checked_momentum_correction(momentum_correction)),
      device_(device) {
  exchange_ranges_ = exchange_ranges(segments_, per_segment);
  n_ = segments_.back().second;
  const collectives::ExchangeConfig config = resolved_exchange(transport, exchange);
  for (const auto& [begin, end] : exchange_ranges_) {
    exchanges_.push_back(std::make_unique<DeviceGradientExchange>(transport, end - begin, config, device_));
  }
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  velocity_ = momentum_ > 0.0 ? torch::zeros({static_cast<std::int64_t>(n_)}, options) : torch::empty({0}, options);
}

void DeviceGradientAverager::set_density(double density) {
  for (auto& exchange : exchanges_) exchange->set_density(density);
}

StepStats DeviceGradientAverager::check_finite(const torch::Tensor& gradient, std::uint64_t iteration) {
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(gradient.numel()), n_, "gradient length");
  std::string nonfinite;
  const torch::Tensor flat = gradient.reshape({-1});
  if (!flat.isfinite().all().item<bool>()) {
    const auto index = flat.isfinite().logical_not().nonzero()[0][0].item<std::int64_t>();
    nonfinite = nonfinite_gradient_message(flat[index].item<float>(), static_cast<std::size_t>(index), segments_, names_,
                                           iteration, transport_.rank());
  }
  return nonfinite_outcome(transport_, skip_nonfinite_, nonfinite, iteration);
}

StepStats DeviceGradientAverager::average(const torch::Tensor& input, torch::Tensor& average, std::uint64_t iteration) {
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(input.numel()), n_, "input length");
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(average.numel()), n_, "output length");
  SPARSGD_ENFORCE(input.device() == device_ && average.device() == device_ &&
                      input.scalar_type() == torch::kFloat32 && average.scalar_type() == torch::kFloat32 &&
                      average.is_contiguous(),
                  "the input and output must be float32 on " << device_.str() << " (the output contiguous)");
  const float workers = static_cast<float>(transport_.size());
  StepStats stats;
  const transport::TrafficCounters before = transport_.counters();
  torch::Tensor flat = input.reshape({-1}).contiguous();
  torch::Tensor out = average.view({-1});
  out.zero_();
  if (momentum_ > 0.0) {
    velocity_.mul_(momentum_).add_(flat);
    flat = velocity_;
  }
  for (std::size_t e = 0; e < exchanges_.size(); ++e) {
    const auto [begin, end] = exchange_ranges_[e];
    const auto b = static_cast<std::int64_t>(begin), length = static_cast<std::int64_t>(end - begin);
    DeviceGradientExchange& exchange = *exchanges_[e];
    const DeviceAggregation& result = exchange.exchange(flat.narrow(0, b, length), iteration);
    if (momentum_ > 0.0) {
      // Momentum factor masking: what left the residual also leaves the velocity, or it would be
      // sent again, amplified, at the next steps.
      const DeviceSelection& sent = exchange.last_selection();
      velocity_.narrow(0, b, length).index_fill_(0, sent.indices.masked_select(exchange.last_consumed()), 0.0f);
    }
    // The aggregators return the SUM; the one division by P is here.
    torch::Tensor part = out.narrow(0, b, length);
    if (result.dense) {
      part.copy_(result.dense_sum).div_(workers);
    } else {
      part.index_copy_(0, result.indices, result.values / workers);
    }
    const auto& times = exchange.last_times();
    stats.compress_cpu_seconds += times.compress_cpu_seconds;
    stats.aggregate_wall_seconds += times.aggregate_seconds;
    stats.aggregate_cpu_seconds += times.aggregate_cpu_seconds;
    stats.feedback_cpu_seconds += times.feedback_cpu_seconds;
    stats.selected += static_cast<std::size_t>(exchange.last_selection().indices.numel());
  }
  stats.bytes_sent = transport_.counters().bytes_sent - before.bytes_sent;
  stats.messages_sent = transport_.counters().messages_sent - before.messages_sent;
  return stats;
}

std::vector<torch::Tensor> DeviceGradientAverager::residuals() const {
  std::vector<torch::Tensor> out;
  for (const auto& exchange : exchanges_) out.push_back(exchange->residual().clone());
  return out;
}

void DeviceGradientAverager::set_residuals(const std::vector<torch::Tensor>& residuals) {
  SPARSGD_ENFORCE_EQ(residuals.size(), exchanges_.size(), "number of residuals (one per exchange)");
  for (std::size_t e = 0; e < exchanges_.size(); ++e) exchanges_[e]->set_residual(residuals[e].to(device_));
}

torch::Tensor DeviceGradientAverager::local_velocity() const { return velocity_.clone(); }

void DeviceGradientAverager::set_local_velocity(const torch::Tensor& velocity) {
  SPARSGD_ENFORCE(velocity.numel() == velocity_.numel(),
                  "the local velocity has " << velocity.numel() << " values, expected " << velocity_.numel()
                                            << (momentum_ > 0.0 ? " (one per model parameter)"
                                                                : " (no momentum correction)"));
  velocity_.copy_(velocity.detach().reshape({-1}));
}

}  // namespace sparsgd::torch_layer
