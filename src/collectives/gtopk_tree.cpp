// gTop-k as in the paper (Shi et al., ICDCS 2019): a binomial-tree reduce to rank 0 in
// ceil(log2 P) rounds, each receiver merging its child's pairs into its own and keeping the k
// largest; rank 0 then broadcasts the final k pairs down the same tree.
//
// Exact residual accounting, which the authors' code gets wrong: the final index set cannot tell a
// child whether its entry was dropped higher up and the same index re-entered from another branch.
// So every node tracks, for its own entries and each child's, whether they are still inside its
// merged set; during the broadcast each parent sends each child, with the final pairs, a bit mask
// of the child's entries that survived at the parent and above.

#include <algorithm>

#include "collectives/algorithms.hpp"
#include "collectives/sparse_merge.hpp"
#include "sparsgd/select/threshold.hpp"
#include "collectives/tags.hpp"

namespace sparsgd::collectives {
namespace {

constexpr int kReduceTag = tags::kGtopkTreeReduce;
constexpr int kBroadcastTag = tags::kGtopkTreeBroadcast;

class GtopkTree final : public Aggregator {
 public:
  explicit GtopkTree(const AggregatorOptions& options) : coding_(options.index_coding) {}
  std::string name() const override { return "gtopk"; }
  std::uint32_t wire_id() const override { return kGtopkTree; }

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    const std::size_t capacity = select::threshold_max_count(k);
    check_local_selection(local, k, capacity, "gtopk");
    const int p = t.size();
    const int r = t.rank();
    const auto n32 = static_cast<std::uint32_t>(local.dim);
    const auto k32 = static_cast<std::uint32_t>(k);

    current_ = local;
    own_.start(local.size());
    children_.clear();
    int parent = -1;
    for (int mask = 1; mask < p; mask <<= 1) {
      if (r & mask) {
        parent = r - mask;
        wire::encode_sparse(wire_id(), n32, k32, current_.indices, current_.values, {}, message_, coding_);
        t.send(parent, kReduceTag, message_);
        break;
      }
      const int child = r + mask;
      if (child >= p) continue;
      t.recv(child, kReduceTag, message_, wire::max_sparse_message_bytes(capacity, 0, coding_));
      const SparseView incoming =
          wire::decode_sparse_view(message_, expectation(*this, local, k, capacity, child, coding_), index_scratch_);
      // Both inputs are this rank's own buffers (current_, and message_ until the next receive).
      merger_.merge(view_of(current_), incoming, k, merged_, own_moves_, &incoming_moves_,
                    {current_.values.data(), const_cast<float*>(incoming.values.data())});
      own_.follow(own_moves_);
      for (Child& c : children_) c.entries.follow(own_moves_);
      children_.push_back({child, {incoming_moves_}});
      std::swap(current_, merged_);
    }

    // survived_[i]: whether pair i of the set this rank sent up (or, at the root, the final set)
    // is inside the final sum.
    if (parent < 0) {
      out.sum = current_;
      survived_.assign(current_.size(), 1);
    } else {
      t.recv(parent, kBroadcastTag, message_, wire::max_sparse_message_bytes(capacity, capacity, coding_));
      wire::decode_sparse(message_, expectation(*this, local, k, capacity, parent, coding_), out.sum, survived_,
                          current_.size());
    }
    out.dense = false;
    out.dense_sum.clear();
    out.consumed.resize(local.size());
    for (std::size_t i = 0; i < local.size(); ++i) out.consumed[i] = survived(own_.position[i]);
    // Largest subtree first: the child joined in the latest round has the deepest subtree.
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      child_mask_.resize(it->entries.position.size());
      for (std::size_t b = 0; b < child_mask_.size(); ++b) child_mask_[b] = survived(it->entries.position[b]);
      wire::encode_sparse(wire_id(), n32, k32, out.sum.indices, out.sum.values, child_mask_, message_, coding_);
      t.send(it->rank, kBroadcastTag, message_);
    }
  }

 private:
  std::uint8_t survived(std::int32_t position) const {
    return position != kDropped && survived_[static_cast<std::size_t>(position)] != 0 ? 1 : 0;
  }

  struct Child {
    int rank;
    TrackedEntries entries;
  };
  wire::IndexCoding coding_;
  std::vector<std::uint32_t> index_scratch_;
  TopkMerger merger_;
  SparseVector current_, merged_;
  TrackedEntries own_;
  std::vector<Child> children_;
  std::vector<std::int32_t> own_moves_, incoming_moves_;
  std::vector<std::uint8_t> survived_, child_mask_;
  std::vector<std::byte> message_;
};

}  // namespace

std::unique_ptr<Aggregator> make_gtopk_tree(const AggregatorOptions& options) {
  return std::make_unique<GtopkTree>(options);
}

}  // namespace sparsgd::collectives
