// Shared-seed random-k: every worker picked the same k indices, so only the k values travel, summed
// with a ring allreduce. A checksum of the indices rides in every message header: workers whose
// picks differ (different seeds, another compressor) fail instead of summing unrelated entries.

#include "collectives/algorithms.hpp"
#include "sparsgd/core/hash.hpp"
#include "collectives/tags.hpp"

namespace sparsgd::collectives {
namespace {

std::uint32_t index_checksum(const std::vector<std::uint32_t>& indices) {
  const std::uint64_t h = fnv1a(std::as_bytes(std::span(indices)));
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

class RandkShared final : public Aggregator {
 public:
  std::string name() const override { return "randk-shared"; }
  std::uint32_t wire_id() const override { return kRandkShared; }
  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    check_local_selection(local, k, local.dim, "randk-shared");
    out.dense = false;
    out.dense_sum.clear();
    out.sum.dim = local.dim;
    out.sum.indices = local.indices;
    out.sum.values = local.values;
    ring_allreduce(t, out.sum.values, expectation(*this, local, k, local.size(), -1), index_checksum(local.indices),
                   tags::kRandkSharedRing);
    out.consumed.assign(local.size(), 1);
  }
};

}  // namespace

std::unique_ptr<Aggregator> make_randk_shared() { return std::make_unique<RandkShared>(); }

}  // namespace sparsgd::collectives
