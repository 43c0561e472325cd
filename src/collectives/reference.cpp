#include "sparsgd/collectives/reference.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {
namespace {

struct Contribution {
  int worker;
  std::size_t entry;
};

struct Pair {
  float value = 0.0f;
  std::vector<Contribution> from;
};

using Set = std::map<std::uint32_t, Pair>;

Set to_set(const SparseVector& selection, int worker) {
  Set set;
  for (std::size_t e = 0; e < selection.size(); ++e) set[selection.indices[e]] = {selection.values[e], {{worker, e}}};
  return set;
}

// own (+) incoming, own's value first, then the k largest |value| with ties by lower index.
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

ReferenceAggregation all_consumed(const std::vector<SparseVector>& selections) {
  ReferenceAggregation out;
  out.sum.dim = selections.front().dim;
  for (const SparseVector& s : selections) out.consumed.emplace_back(s.size(), 1);
  return out;
}

}  // namespace

bool sums_agree(float a, float b, double magnitude, int terms) {
  const double mu = static_cast<double>(std::max(terms - 1, 0)) * 0x1.0p-24;
  const double gamma = mu / (1.0 - mu);
  return std::fabs(static_cast<double>(a) - b) <= 2.0 * gamma * magnitude;
}

ReferenceAggregation reference_aggregate(const std::string& aggregator, const std::vector<SparseVector>& selections,
                                         std::size_t k) {
  SPARSGD_ENFORCE(!selections.empty(), "reference needs at least one worker");
  const int p = static_cast<int>(selections.size());
  const std::size_t n = selections.front().dim;
  if (aggregator == "dense") {
    ReferenceAggregation out = all_consumed(selections);
    out.dense = true;
    out.dense_sum.assign(n, 0.0f);
    out.magnitude.assign(n, 0.0);
    for (const SparseVector& s : selections) {
      for (std::size_t e = 0; e < s.size(); ++e) {
        out.dense_sum[s.indices[e]] += s.values[e];
        out.magnitude[s.indices[e]] += std::fabs(static_cast<double>(s.values[e]));
      }
    }
    return out;
  }
  if (aggregator == "allgather" || aggregator == "randk-shared") {
    if (aggregator == "randk-shared") {
      for (const SparseVector& s : selections) {
        SPARSGD_ENFORCE(s.indices == selections.front().indices, "randk-shared needs identical indices on all workers");
      }
    }
    ReferenceAggregation out = all_consumed(selections);
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
  std::vector<Set> sets;
  for (int w = 0; w < p; ++w) sets.push_back(to_set(selections[static_cast<std::size_t>(w)], w));
  if (aggregator == "gtopk") {
    // Binomial tree: in round `mask`, rank r (r % 2mask == 0) merges rank r + mask's set.
    for (int mask = 1; mask < p; mask <<= 1) {
      for (int r = 0; r + mask < p; r += 2 * mask) sets[r] = merge_topk(sets[r], sets[r + mask], k);
    }
    return from_final_set(sets[0], selections);
  }
  if (aggregator == "gtopk-rd") {
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    for (int r = 0; r + p2 < p; ++r) sets[r] = merge_topk(sets[r], sets[r + p2], k);
    for (int dist = 1; dist < p2; dist <<= 1) {
      for (int r = 0; r < p2; ++r) {
        if (r & dist) continue;
        const Set merged = merge_topk(sets[r], sets[r ^ dist], k);
        sets[r] = merged;
        sets[r ^ dist] = merged;
      }
    }
    return from_final_set(sets[0], selections);
  }
  throw InvalidArgument("reference: unknown aggregator '" + aggregator + "'");
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
