#include "sparsgd/torch/gradient_averager.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

double checked_momentum_correction(double momentum) {
  SPARSGD_ENFORCE(std::isfinite(momentum) && momentum >= 0.0 && momentum < 1.0,
                  "momentum correction's momentum must be in [0, 1), got " << momentum);
  return momentum;
}

Segments exchange_ranges(const Segments& segments, bool per_segment) {
  std::size_t n = 0;
  for (const auto& [begin, end] : segments) {
    SPARSGD_ENFORCE(begin == n && end >= begin, "segments must tile the buffer in order: [" << begin << ", " << end
                                                                                           << ") after " << n);
    n = end;
  }
  SPARSGD_ENFORCE(n > 0, "the model has no parameters");
  Segments ranges = per_segment ? segments : Segments{{0, n}};
  // Empty segments (a parameter with no elements) have nothing to exchange.
  std::erase_if(ranges, [](const auto& range) { return range.first == range.second; });
  return ranges;
}

collectives::ExchangeConfig resolved_exchange(transport::Transport& transport,
                                              const collectives::ExchangeConfig& exchange) {
  // auto measures the network once here, not once per exchange at its first call.
  collectives::ExchangeConfig config = exchange;
  if (collectives::find_aggregator(config.aggregator).properties.delegates && !config.network.known) {
    config.network = collectives::measure_network(transport);
  }
  return config;
}

GradientAverager::GradientAverager(transport::Transport& transport, Segments segments, std::vector<std::string> names,
                                   const collectives::ExchangeConfig& exchange, bool per_segment, bool skip_nonfinite,
                                   double momentum_correction)
    : transport_(transport),
      segments_(std::move(segments)),
      names_(std::move(names)),
      skip_nonfinite_(skip_nonfinite),
      density_(exchange.density),
      momentum_(checked_momentum_correction(momentum_correction)) {
  exchange_ranges_ = exchange_ranges(segments_, per_segment);
  n_ = segments_.back().second;
  const collectives::ExchangeConfig config = resolved_exchange(transport, exchange);
  for (const auto& [begin, end] : exchange_ranges_) {
    exchanges_.push_back(std::make_unique<collectives::GradientExchange>(transport, end - begin, config));
  }
  last_results_.assign(exchanges_.size(), nullptr);
  if (momentum_ > 0.0) velocity_.assign(n_, 0.0f);
}

void GradientAverager::set_density(double density) {
  for (auto& exchange : exchanges_) exchange->set_density(density);
  density_ = density;
}

std::string nonfinite_gradient_message(float value, std::size_t index, const Segments& segments,
                                       const std::vector<std::string>& names, std::uint64_t iteration, int rank) {
  std::size_t segment = 0;
  while (segment + 1 < segments.size() && segments[segment].second <= index) ++segment;
  std::ostringstream where;
  // A NaN's sign says nothing; print it as "nan" whatever its bits.
  where << "non-finite gradient (" << (std::isnan(value) ? std::string("nan") : value < 0 ? "-inf" : "inf")
        << ") in parameter '";
  if (segment < names.size()) {
    where << names[segment];
  } else {
    where << '#' << segment;
  }
  where << "' at element " << index - segments[segment].first << ", iteration " << iteration << " on rank " << rank;
  return where.str();
}

std::string GradientAverager::find_nonfinite(std::span<const float> gradient, std::uint64_t iteration) const {
  const auto bad = std::find_if(gradient.begin(), gradient.end(), [](float v) { return !std::isfinite(v); });
  if (bad == gradient.end()) return {};
  return nonfinite_gradient_message(*bad, static_cast<std::size_t>(bad - gradient.begin()), segments_, names_,
                                    iteration, transport_.rank());
}

StepStats nonfinite_outcome(transport::Transport& transport, bool skip_nonfinite, const std::string& nonfinite,
                            std::uint64_t iteration) {
  StepStats stats;
  if (!skip_nonfinite) {
    if (!nonfinite.empty()) throw InvalidData(nonfinite + "; nothing was sent");
  } else if (const int flagged = collectives::lowest_flagged_rank(transport, !nonfinite.empty()); flagged >= 0) {
    stats.skipped = true;
    stats.skip_reason = !nonfinite.empty() ? nonfinite
                                           : "rank " + std::to_string(flagged) +
                                                 " found a non-finite gradient at iteration " + std::to_string(iteration);
  }
  return stats;
}

StepStats GradientAverager::check_finite(std::span<const float> gradient, std::uint64_t iteration) {
  SPARSGD_ENFORCE_EQ(gradient.size(), n_, "gradient length");
  return nonfinite_outcome(transport_, skip_nonfinite_, find_nonfinite(gradient, iteration), iteration);
}

StepStats GradientAverager::average(std::span<const float> input, std::span<float> average, std::uint64_t iteration) {
  SPARSGD_ENFORCE_EQ(input.size(), n_, "input length");
  SPARSGD_ENFORCE_EQ(average.size(), n_, "output length");
  const auto workers = static_cast<float>(transport_.size());
  StepStats stats;
  const transport::TrafficCounters before = transport_.counters();
  std::fill(average.begin(), average.end(), 0.0f);
  if (momentum_ > 0.0) {
    SPARSGD_ENFORCE_EQ(velocity_.size(), n_, "local velocity length");
    const auto m = static_cast<float>(momentum_);
    for (std::size_t i = 0; i < n_; ++i) velocity_[i] = m * velocity_[i] + input[i];
    input = velocity_;
  }
  for (std::size_t e = 0; e < exchanges_.size(); ++e) {
    const auto [begin, end] = exchange_ranges_[e];
    collectives::GradientExchange& exchange = *exchanges_[e];
    const collectives::Aggregation& result = exchange.exchange(input.subspan(begin, end - begin), iteration);
    last_results_[e] = &result;
    if (momentum_ > 0.0) {
      // Momentum factor masking: what left the residual also leaves the velocity, or it would be
      // sent again, amplified, at the next steps.
      const SparseVector& sent = exchange.last_selection();
      for (std::size_t j = 0; j < sent.size(); ++j) {
        if (result.consumed[j]) velocity_[begin + sent.indices[j]] = 0.0f;
      }
    }
    // The aggregators return the SUM; the one division by P is here.
    if (result.dense) {
      for (std::size_t i = 0; i < result.dense_sum.size(); ++i) average[begin + i] = result.dense_sum[i] / workers;
    } else {
      for (std::size_t j = 0; j < result.sum.size(); ++j) average[begin + result.sum.indices[j]] = result.sum.values[j] / workers;
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
  return stats;
}

void GradientAverager::set_local_velocity(const std::vector<float>& velocity) {
  SPARSGD_ENFORCE(velocity.size() == velocity_.size(),
                  "the local velocity has " << velocity.size() << " values, expected " << velocity_.size()
                                            << (momentum_ > 0.0 ? " (one per model parameter)"
                                                                : " (no momentum correction)"));
  velocity_ = velocity;
}

std::vector<std::vector<float>> GradientAverager::residuals() const {
  std::vector<std::vector<float>> out;
  for (const auto& exchange : exchanges_) {
    const auto r = exchange->feedback().residual();
    out.emplace_back(r.begin(), r.end());
  }
  return out;
}

void GradientAverager::set_residuals(const std::vector<std::vector<float>>& residuals) {
  SPARSGD_ENFORCE_EQ(residuals.size(), exchanges_.size(), "number of residuals (one per exchange)");
  for (std::size_t e = 0; e < exchanges_.size(); ++e) exchanges_[e]->feedback().set_residual(residuals[e]);
}

}  // namespace sparsgd::torch_layer
