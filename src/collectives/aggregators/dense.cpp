// Dense S-SGD: the selection (all n entries for the `none` compressor) is scattered into n floats
// and summed with a ring allreduce. Every local entry is consumed.

#include <algorithm>
#include <cmath>

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& dense_aggregator();

namespace {

class DenseRing final : public DescribedAggregator<dense_aggregator> {
 public:
  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    check_local_selection(local, k, local.dim, "dense");
    out.dense = true;
    out.sum.clear();
    out.dense_sum.assign(local.dim, 0.0f);
    for (std::size_t i = 0; i < local.size(); ++i) out.dense_sum[local.indices[i]] = local.values[i];
    const std::uint64_t agree[] = {wire_id(), local.dim, k};
    if (!t.native_allreduce_sum(out.dense_sum, agree)) {
      ring_allreduce(t, out.dense_sum, expectation(*this, local, k, local.dim, -1), 0, tag_block(dense_aggregator()).base);
    }
    out.consumed.assign(local.size(), 1);
  }
};

ReferenceAggregation reference(const std::vector<SparseVector>& selections, std::size_t) {
  const std::size_t n = selections.front().dim;
  ReferenceAggregation out;
  out.dense = true;
  out.dense_sum.assign(n, 0.0f);
  out.magnitude.assign(n, 0.0);
  for (const SparseVector& s : selections) {
    out.consumed.emplace_back(s.size(), 1);
    for (std::size_t e = 0; e < s.size(); ++e) {
      out.dense_sum[s.indices[e]] += s.values[e];
      out.magnitude[s.indices[e]] += std::fabs(static_cast<double>(s.values[e]));
    }
  }
  return out;
}

}  // namespace

const AggregatorDescriptor& dense_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "dense",
      .wire_id = 1,
      .summary = "ring allreduce of all n values (dense S-SGD)",
      .properties = {.sends_indices = false, .exact_sum_order = false, .dense_result = true, .auto_rank = 4},
      .tag_count = 2,
      .make = construct<DenseRing>,
      .reference = reference,
      .cost = [](const CostQuery& q) { return closed_form::ring_cost(q.n, q); },
      .traffic = [](int workers, int rank, std::size_t n, std::size_t) { return closed_form::ring_traffic(n, workers, rank); },
      // gradient, residual, the dense sum and the ring's buffers; the reference's sum and magnitudes.
      .worker_memory = {.arrays = 4.8, .pairs = 8},
      .reference_memory = {.arrays = 3, .pairs = 6},
      .result_memory = {.arrays = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
