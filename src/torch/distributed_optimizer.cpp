#include "sparsgd/torch/distributed_optimizer.hpp"

#include <cmath>
#include <sstream>

#include "sparsgd/collectives/bookkeeping.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

DistributedOptimizer::DistributedOptimizer(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                                           std::vector<std::string> names, const collectives::ExchangeConfig& exchange,
                                           const SgdConfig& sgd)
    : transport_(transport), flat_(std::move(parameters)), names_(std::move(names)), sgd_(sgd), density_(exchange.density) {
  SPARSGD_ENFORCE(std::isfinite(sgd.momentum) && sgd.momentum >= 0.0 && sgd.momentum < 1.0,
                  "momentum must be in [0, 1), got " << sgd.momentum);
  SPARSGD_ENFORCE(std::isfinite(sgd.weight_decay) && sgd.weight_decay >= 0.0,
                  "weight decay must be >= 0, got " << sgd.weight_decay);
  SPARSGD_ENFORCE(flat_.size() > 0, "the model has no parameters");
  if (sgd.per_layer) {
    exchange_ranges_ = flat_.layer_ranges();
  } else {
    exchange_ranges_ = {{0, flat_.size()}};
  }
  for (const auto& [begin, end] : exchange_ranges_) {
    exchanges_.push_back(std::make_unique<collectives::GradientExchange>(transport, end - begin, exchange));
  }
  const std::size_t n = flat_.size();
  gradient_.resize(n);
  parameters_.resize(n);
  velocity_.assign(n, 0.0f);
  local_velocity_.assign(sgd.momentum_correction ? n : 0, 0.0f);
  average_.resize(n);
}

void DistributedOptimizer::broadcast_parameters() {
  flat_.gather_values(parameters_);
  collectives::broadcast(transport_, parameters_, 0);
  flat_.scatter_values(parameters_);
}

void DistributedOptimizer::set_density(double density) {
  for (auto& exchange : exchanges_) exchange->set_density(density);
  density_ = density;
}

std::string DistributedOptimizer::find_nonfinite_gradient(std::uint64_t iteration) const {
  for (std::size_t i = 0; i < gradient_.size(); ++i) {
    if (std::isfinite(gradient_[i])) continue;
    const auto& ranges = flat_.layer_ranges();
    std::size_t layer = 0;
    while (layer + 1 < ranges.size() && ranges[layer].second <= i) ++layer;
    std::ostringstream where;
    where << "non-finite gradient (" << gradient_[i] << ") in parameter '";
    if (layer < names_.size()) {
      where << names_[layer];
    } else {
      where << '#' << layer;
    }
    where << "' at element " << i - ranges[layer].first << ", iteration " << iteration << " on rank "
          << transport_.rank();
    return where.str();
  }
  return {};
}

StepStats DistributedOptimizer::step(std::uint64_t iteration, double lr) {
  SPARSGD_ENFORCE(std::isfinite(lr) && lr >= 0.0, "learning rate must be a finite number >= 0, got " << lr);
  flat_.gather_gradients(gradient_);
  const std::string nonfinite = find_nonfinite_gradient(iteration);
  if (!sgd_.skip_nonfinite) {
    if (!nonfinite.empty()) throw InvalidData(nonfinite + "; nothing was sent");
  } else if (const int flagged = collectives::lowest_flagged_rank(transport_, !nonfinite.empty()); flagged >= 0) {
    StepStats skipped;
    skipped.skipped = true;
    skipped.skip_reason = !nonfinite.empty() ? nonfinite
                                             : "rank " + std::to_string(flagged) + " found a non-finite gradient at iteration " +
                                                   std::to_string(iteration);
    return skipped;
  }
  flat_.gather_values(parameters_);
  const std::size_t n = flat_.size();
  const auto mu = static_cast<float>(sgd_.momentum);
  const auto wd = static_cast<float>(sgd_.weight_decay);
  const auto workers = static_cast<float>(transport_.size());

  const float* input = gradient_.data();
  if (sgd_.momentum_correction) {
    for (std::size_t i = 0; i < n; ++i) local_velocity_[i] = mu * local_velocity_[i] + gradient_[i] + wd * parameters_[i];
    input = local_velocity_.data();
  }

  StepStats stats;
  const transport::TrafficCounters before = transport_.counters();
  std::fill(average_.begin(), average_.end(), 0.0f);
  for (std::size_t e = 0; e < exchanges_.size(); ++e) {
    const auto [begin, end] = exchange_ranges_[e];
    collectives::GradientExchange& exchange = *exchanges_[e];
    const collectives::Aggregation& result =
        exchange.exchange(std::span<const float>(input + begin, end - begin), iteration);
    if (result.dense) {
      for (std::size_t i = 0; i < result.dense_sum.size(); ++i) average_[begin + i] = result.dense_sum[i] / workers;
    } else {
      for (std::size_t j = 0; j < result.sum.size(); ++j) average_[begin + result.sum.indices[j]] = result.sum.values[j] / workers;
    }
    if (sgd_.momentum_correction) {
      // Momentum factor masking: what left the residual also leaves the local velocity.
      const SparseVector& sent = exchange.last_selection();
      for (std::size_t j = 0; j < sent.size(); ++j) {
        if (result.consumed[j]) local_velocity_[begin + sent.indices[j]] = 0.0f;
      }
    }
    const auto& times = exchange.last_times();
    stats.compress_cpu_seconds += times.compress_cpu_seconds;
    stats.aggregate_wall_seconds += times.aggregate_seconds;
    stats.aggregate_cpu_seconds += times.aggregate_cpu_seconds;
    stats.feedback_cpu_seconds += times.feedback_cpu_seconds;
    stats.selected += exchange.last_selection().size();
  }
  stats.bytes_sent = transport_.counters().bytes_sent - before.bytes_sent;
  stats.messages_sent = transport_.counters().messages_sent - before.messages_sent;

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

std::vector<std::vector<float>> DistributedOptimizer::residuals() const {
  std::vector<std::vector<float>> out;
  for (const auto& exchange : exchanges_) {
    const auto r = exchange->feedback().residual();
    out.emplace_back(r.begin(), r.end());
  }
  return out;
}

void DistributedOptimizer::set_residuals(const std::vector<std::vector<float>>& residuals) {
  SPARSGD_ENFORCE_EQ(residuals.size(), exchanges_.size(), "checkpoint holds another number of residuals");
  for (std::size_t e = 0; e < exchanges_.size(); ++e) exchanges_[e]->feedback().set_residual(residuals[e]);
}

}  // namespace sparsgd::torch_layer
