// Shared-seed random-k: every worker picked the same k indices, so only the k values travel, summed
// with a ring allreduce. A checksum of the indices rides in every message header: workers whose
// picks differ (different seeds, another compressor) fail instead of summing unrelated entries.

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/verification/reference_sets.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/hash.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& randk_shared_aggregator();

namespace {

std::uint32_t index_checksum(const std::vector<std::uint32_t>& indices) {
  const std::uint64_t h = fnv1a(std::as_bytes(std::span(indices)));
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

class RandkShared final : public DescribedAggregator<randk_shared_aggregator> {
 public:
  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    check_local_selection(local, k, local.dim, "randk-shared");
    out.dense = false;
    out.dense_sum.clear();
    out.sum.dim = local.dim;
    out.sum.indices = local.indices;
    out.sum.values = local.values;
    ring_allreduce(t, out.sum.values, expectation(*this, local, k, local.size(), -1), index_checksum(local.indices),
                   tag_block(randk_shared_aggregator()).base);
    out.consumed.assign(local.size(), 1);
  }
};

ReferenceAggregation reference(const std::vector<SparseVector>& selections, std::size_t) {
  for (const SparseVector& s : selections) {
    SPARSGD_ENFORCE(s.indices == selections.front().indices, "randk-shared needs identical indices on all workers");
  }
  return reference_sets::sum_in_rank_order(selections);
}

}  // namespace

const AggregatorDescriptor& randk_shared_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "randk-shared",
      .wire_id = 5,
      .summary = "ring allreduce of the k values of indices every worker drew with one seed",
      .properties = {.sends_indices = false, .exact_sum_order = false, .needs_shared_indices = true},
      .tag_count = 2,
      .make = construct<RandkShared>,
      .reference = reference,
      .cost = [](const CostQuery& q) { return closed_form::ring_cost(q.k, q); },
      .traffic = [](int workers, int rank, std::size_t, std::size_t k) { return closed_form::ring_traffic(k, workers, rank); },
      .worker_memory = {.arrays = 2.1, .pairs = 4},
      .reference_memory = {.pairs = 16, .pairs_per_worker = 1},
      .result_memory = {.pairs = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
