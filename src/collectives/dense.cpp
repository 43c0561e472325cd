// Dense S-SGD: the selection (all n entries for the `none` compressor) is scattered into n floats
// and summed with a ring allreduce. Every local entry is consumed.

#include <algorithm>

#include "collectives/algorithms.hpp"
#include "collectives/tags.hpp"

namespace sparsgd::collectives {
namespace {

class DenseRing final : public Aggregator {
 public:
  std::string name() const override { return "dense"; }
  std::uint32_t wire_id() const override { return kDenseRing; }
  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    check_local_selection(local, k, local.dim, "dense");
    out.dense = true;
    out.sum.clear();
    out.dense_sum.assign(local.dim, 0.0f);
    for (std::size_t i = 0; i < local.size(); ++i) out.dense_sum[local.indices[i]] = local.values[i];
    const std::uint64_t agree[] = {wire_id(), local.dim, k};
    if (!t.native_allreduce_sum(out.dense_sum, agree)) {
      ring_allreduce(t, out.dense_sum, expectation(*this, local, k, local.dim, -1), 0, tags::kDenseRing);
    }
    out.consumed.assign(local.size(), 1);
  }
};

}  // namespace

std::unique_ptr<Aggregator> make_dense_ring() { return std::make_unique<DenseRing>(); }

}  // namespace sparsgd::collectives
