#include "sparsgd/collectives/replay.hpp"

#include <algorithm>
#include <cmath>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {
namespace {

// Before any member is sized from them.
std::size_t checked_length(const ExchangeConfig& config, std::size_t n, int workers) {
  validate(config);
  SPARSGD_ENFORCE(workers >= 1, "the replay needs at least one worker, got " << workers);
  return n;
}

}  // namespace

std::string reference_sum_difference(const ReferenceAggregation& want, const Aggregation& got, bool exact_order,
                                     int terms) {
  auto differs = [&](float a, float b, std::size_t i) {
    return exact_order ? a != b : !sums_agree(a, b, want.magnitude[i], terms);
  };
  if (got.dense != want.dense) return got.dense ? "a dense sum where a sparse one was expected" : "a sparse sum where a dense one was expected";
  if (got.dense) {
    if (got.dense_sum.size() != want.dense_sum.size()) return "a dense sum of another length";
    for (std::size_t i = 0; i < got.dense_sum.size(); ++i) {
      if (differs(got.dense_sum[i], want.dense_sum[i], i)) {
        return "entry " + std::to_string(i) + ": " + std::to_string(got.dense_sum[i]) + " where the reference has " +
               std::to_string(want.dense_sum[i]);
      }
    }
    return "";
  }
  if (got.sum.indices != want.sum.indices) return "the sum's indices differ from the reference's";
  for (std::size_t e = 0; e < got.sum.size(); ++e) {
    if (differs(got.sum.values[e], want.sum.values[e], e)) {
      return "index " + std::to_string(got.sum.indices[e]) + ": " + std::to_string(got.sum.values[e]) +
             " where the reference has " + std::to_string(want.sum.values[e]);
    }
  }
  return "";
}

ExchangeReplay::ExchangeReplay(const ExchangeConfig& config, std::size_t n, int workers)
    : n_(checked_length(config, n, workers)),
      k_(k_from_density(n, config.density)),
      error_feedback_(config.error_feedback),
      exact_order_(find_aggregator(config.aggregator).properties.exact_sum_order),
      aggregator_(config.aggregator),
      scale_(1.0),
      residual_(static_cast<std::size_t>(workers), std::vector<float>(n, 0.0f)),
      selections_(static_cast<std::size_t>(workers)),
      gradient_(n),
      consumed_sum_(n, 0.0) {
  for (int w = 0; w < workers; ++w) compressors_.push_back(compress::make_compressor(config.compressor));
  scale_ = compressors_[0]->value_scale(n, k_);
}

void ExchangeReplay::step(std::uint64_t iteration, const std::function<void(int, std::span<float>)>& gradient,
                          std::string_view method) {
  const AggregatorDescriptor& used = find_aggregator(method.empty() ? std::string_view(aggregator_) : method);
  SPARSGD_ENFORCE(!used.properties.delegates, "the replay of " << used.name
                                                                << " needs the aggregator each step used (Aggregation::method)");
  exact_order_ = used.properties.exact_sum_order;
  for (const std::uint32_t i : touched_) consumed_sum_[i] = 0.0;
  touched_.clear();
  for (int w = 0; w < workers(); ++w) {
    const auto iw = static_cast<std::size_t>(w);
    std::vector<float>& acc = residual_[iw];  // acc until the update below, then the residual
    gradient(w, gradient_);
    for (std::size_t i = 0; i < n_; ++i) acc[i] = (error_feedback_ ? acc[i] : 0.0f) + gradient_[i];
    compressors_[iw]->compress(acc, k_, {iteration, w}, selections_[iw]);
  }
  reference_ = {};  // not two references alive at once: bench comm's memory estimate counts one
  reference_ = reference_aggregate(std::string(used.name), selections_, k_);
  for (int w = 0; w < workers(); ++w) {
    const auto iw = static_cast<std::size_t>(w);
    std::vector<float>& acc = residual_[iw];
    const SparseVector& sel = selections_[iw];
    for (std::size_t e = 0; e < sel.size(); ++e) {
      if (!reference_.consumed[iw][e]) continue;
      const std::uint32_t i = sel.indices[e];
      consumed_sum_[i] += acc[i];
      touched_.push_back(i);
      acc[i] = 0.0f;
    }
  }
}

std::string ExchangeReplay::sum_difference(const Aggregation& got) const {
  return reference_sum_difference(reference_, got, exact_order_, workers());
}

double ExchangeReplay::conservation_error(const Aggregation& aggregated) const {
  // Both sides are zero outside the touched indices and the aggregated sum's own.
  double diff = 0.0, norm = 0.0;
  auto add = [&](double left, double right) {
    diff += (left - right) * (left - right);
    norm += right * right;
  };
  if (aggregated.dense) {
    SPARSGD_ENFORCE_EQ(aggregated.dense_sum.size(), n_, "conservation: a dense sum of another length");
    for (std::size_t i = 0; i < n_; ++i) add(scale_ * consumed_sum_[i], aggregated.dense_sum[i]);
  } else {
    // A walk over the touched indices and the sum's, both ascending: no array of n here, since
    // bench comm runs this beside every worker's residual.
    std::vector<std::uint32_t> touched = touched_;
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    std::size_t t = 0;
    for (std::size_t e = 0; e < aggregated.sum.size(); ++e) {
      const std::uint32_t i = aggregated.sum.indices[e];
      for (; t < touched.size() && touched[t] < i; ++t) add(scale_ * consumed_sum_[touched[t]], 0.0);
      if (t < touched.size() && touched[t] == i) ++t;
      add(scale_ * consumed_sum_[i], aggregated.sum.values[e]);
    }
    for (; t < touched.size(); ++t) add(scale_ * consumed_sum_[touched[t]], 0.0);
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace sparsgd::collectives
