#include "sparsgd/collectives/selection_replay.hpp"

#include <algorithm>
#include <cmath>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/replay.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {

SelectionReplay::SelectionReplay(std::string aggregator) : aggregator_(std::move(aggregator)) {
  find_aggregator(aggregator_);  // throws for an unknown name
}

void SelectionReplay::step(const std::vector<SparseVector>& selections, std::size_t k, std::string_view method) {
  const AggregatorDescriptor& used = find_aggregator(method.empty() ? std::string_view(aggregator_) : method);
  SPARSGD_ENFORCE(!used.properties.delegates,
                  "the replay of " << used.name << " needs the aggregator each step used (Aggregation::method)");
  SPARSGD_ENFORCE(!selections.empty(), "the replay needs at least one worker");
  exact_order_ = used.properties.exact_sum_order;
  workers_ = static_cast<int>(selections.size());
  n_ = selections.front().dim;
  reference_ = {};  // not two references alive at once: bench comm's memory estimate counts one
  reference_ = reference_aggregate(std::string(used.name), selections, k);
  consumed_sum_.clear();
  for (std::size_t w = 0; w < selections.size(); ++w) {
    const SparseVector& s = selections[w];
    for (std::size_t e = 0; e < s.size(); ++e) {
      if (reference_.consumed[w][e]) consumed_sum_.emplace_back(s.indices[e], s.values[e]);
    }
  }
  // Per index in rank order (stable), in double: the exact mass whatever order the aggregator took.
  std::stable_sort(consumed_sum_.begin(), consumed_sum_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t out = 0;
  for (std::size_t e = 0; e < consumed_sum_.size(); ++e) {
    if (out > 0 && consumed_sum_[out - 1].first == consumed_sum_[e].first) {
      consumed_sum_[out - 1].second += consumed_sum_[e].second;
    } else {
      consumed_sum_[out++] = consumed_sum_[e];
    }
  }
  consumed_sum_.resize(out);
}

std::string SelectionReplay::sum_difference(const Aggregation& got) const {
  return reference_sum_difference(reference_, got, exact_order_, workers_);
}

double SelectionReplay::conservation_error(const Aggregation& aggregated) const {
  double diff = 0.0, norm = 0.0;
  auto add = [&](double want, double got) {
    diff += (want - got) * (want - got);
    norm += got * got;
  };
  std::size_t t = 0;
  if (aggregated.dense) {
    SPARSGD_ENFORCE_EQ(aggregated.dense_sum.size(), n_, "conservation: a dense sum of another length");
    for (std::size_t i = 0; i < n_; ++i) {
      double want = 0.0;
      if (t < consumed_sum_.size() && consumed_sum_[t].first == i) want = consumed_sum_[t++].second;
      add(want, aggregated.dense_sum[i]);
    }
  } else {
    // Both ascending by index: a merge walk; an index on one side only counts against zero.
    for (std::size_t e = 0; e < aggregated.sum.size(); ++e) {
      const std::uint32_t i = aggregated.sum.indices[e];
      for (; t < consumed_sum_.size() && consumed_sum_[t].first < i; ++t) add(consumed_sum_[t].second, 0.0);
      double want = 0.0;
      if (t < consumed_sum_.size() && consumed_sum_[t].first == i) want = consumed_sum_[t++].second;
      add(want, aggregated.sum.values[e]);
    }
  }
  for (; t < consumed_sum_.size(); ++t) add(consumed_sum_[t].second, 0.0);
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace sparsgd::collectives
