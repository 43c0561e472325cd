#include "sparsgd/collectives/reference.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "collectives/verification/reference_sets.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {
namespace reference_sets {

std::vector<Set> to_sets(const std::vector<SparseVector>& selections) {
  std::vector<Set> sets(selections.size());
  for (std::size_t w = 0; w < selections.size(); ++w) {
    const SparseVector& s = selections[w];
    for (std::size_t e = 0; e < s.size(); ++e) sets[w][s.indices[e]] = {s.values[e], {{static_cast<int>(w), e}}};
  }
  return sets;
}

Set merge_topk(const Set& own, const Set& incoming, std::size_t k) {
  Set merged = own;
  for (const auto& [index, pair] : incoming) {
    auto it = merged.find(index);
    if (it == merged.end()) {
      merged[index] = pair;
    } else {
      it->second.value = it->second.value + pair.value;
      it->second.from.insert(it->second.from.end(), pair.from.begin(), pair.from.end());
    }
  }
  if (merged.size() <= k) return merged;
  std::vector<std::pair<std::uint32_t, float>> order;
  for (const auto& [index, pair] : merged) order.emplace_back(index, pair.value);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    const float ma = std::fabs(a.second), mb = std::fabs(b.second);
    return ma != mb ? ma > mb : a.first < b.first;
  });
  Set kept;
  for (std::size_t i = 0; i < k; ++i) kept[order[i].first] = merged[order[i].first];
  return kept;
}

ReferenceAggregation from_final_set(const Set& final_set, const std::vector<SparseVector>& selections) {
  ReferenceAggregation out;
  out.sum.dim = selections.front().dim;
  out.consumed.resize(selections.size());
  for (std::size_t w = 0; w < selections.size(); ++w) out.consumed[w].assign(selections[w].size(), 0);
  for (const auto& [index, pair] : final_set) {
    out.sum.indices.push_back(index);
    out.sum.values.push_back(pair.value);
    for (const Contribution& c : pair.from) out.consumed[static_cast<std::size_t>(c.worker)][c.entry] = 1;
  }
  return out;
}

ReferenceAggregation sum_in_rank_order(const std::vector<SparseVector>& selections) {
  ReferenceAggregation out;
  out.sum.dim = selections.front().dim;
  for (const SparseVector& s : selections) out.consumed.emplace_back(s.size(), 1);
  std::map<std::uint32_t, std::pair<float, double>> sum;  // value, magnitude
  for (const SparseVector& s : selections) {
    for (std::size_t e = 0; e < s.size(); ++e) {
      auto& [value, magnitude] = sum[s.indices[e]];
      value += s.values[e];
      magnitude += std::fabs(static_cast<double>(s.values[e]));
    }
  }
  for (const auto& [index, entry] : sum) {
    out.sum.indices.push_back(index);
    out.sum.values.push_back(entry.first);
    out.magnitude.push_back(entry.second);
  }
  return out;
}

}  // namespace reference_sets

bool sums_agree(float a, float b, double magnitude, int terms) {
  const double mu = static_cast<double>(std::max(terms - 1, 0)) * 0x1.0p-24;
  const double gamma = mu / (1.0 - mu);
  return std::fabs(static_cast<double>(a) - b) <= 2.0 * gamma * magnitude;
}

ReferenceAggregation reference_aggregate(const std::string& aggregator, const std::vector<SparseVector>& selections,
                                         std::size_t k) {
  const AggregatorDescriptor& descriptor = find_aggregator(aggregator);
  SPARSGD_ENFORCE(!selections.empty(), "reference needs at least one worker");
  for (const SparseVector& s : selections) {
    SPARSGD_ENFORCE(s.dim == selections.front().dim, "reference: the workers' selections differ in dimension");
  }
  return descriptor.reference(selections, k);
}

std::vector<float> reference_average(const ReferenceAggregation& aggregation, std::size_t n, int workers) {
  const auto p = static_cast<float>(workers);
  std::vector<float> average(n, 0.0f);
  if (aggregation.dense) {
    for (std::size_t i = 0; i < n && i < aggregation.dense_sum.size(); ++i) average[i] = aggregation.dense_sum[i] / p;
  } else {
    for (std::size_t j = 0; j < aggregation.sum.size(); ++j) {
      average[aggregation.sum.indices[j]] = aggregation.sum.values[j] / p;
    }
  }
  return average;
}

}  // namespace sparsgd::collectives
