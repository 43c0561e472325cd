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

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/verification/reference_sets.hpp"
#include "collectives/blocks/sparse_merge.hpp"
#include "sparsgd/select/threshold.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& gtopk_aggregator();

namespace {

// Offsets in its tag block.
constexpr int kReduceTag = 0;
constexpr int kBroadcastTag = 1;

class GtopkTree final : public DescribedAggregator<gtopk_aggregator> {
 public:
  explicit GtopkTree(const AggregatorOptions& options)
      : coding_(options.index_coding), tags_(tag_block(gtopk_aggregator())) {}

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
        t.send(parent, tags_[kReduceTag], message_);
        break;
      }
      const int child = r + mask;
      if (child >= p) continue;
      t.recv(child, tags_[kReduceTag], message_, wire::max_sparse_message_bytes(capacity, 0, coding_));
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
      t.recv(parent, tags_[kBroadcastTag], message_, wire::max_sparse_message_bytes(capacity, capacity, coding_));
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
      t.send(it->rank, tags_[kBroadcastTag], message_);
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
  TagBlock tags_;
  std::vector<std::uint32_t> index_scratch_;
  TopkMerger merger_;
  SparseVector current_, merged_;
  TrackedEntries own_;
  std::vector<Child> children_;
  std::vector<std::int32_t> own_moves_, incoming_moves_;
  std::vector<std::uint8_t> survived_, child_mask_;
  std::vector<std::byte> message_;
};

// Binomial tree: in round `mask`, rank r (r % 2 mask == 0) merges rank r + mask's set.
ReferenceAggregation reference(const std::vector<SparseVector>& selections, std::size_t k) {
  std::vector<reference_sets::Set> sets = reference_sets::to_sets(selections);
  const auto p = sets.size();
  for (std::size_t mask = 1; mask < p; mask <<= 1) {
    for (std::size_t r = 0; r + mask < p; r += 2 * mask) sets[r] = reference_sets::merge_topk(sets[r], sets[r + mask], k);
  }
  return reference_sets::from_final_set(sets[0], selections);
}

// ceil(log2 P) rounds up with k pairs, as many down with k pairs and a k-bit mask; the root sends
// the most: one broadcast message a round.
CommCost cost(const CostQuery& q) {
  CommCost cost;
  if (q.workers == 1) return cost;
  const int rounds = closed_form::ceil_log2(q.workers);
  const double up = q.sparse_message_bytes(), down = q.sparse_message_bytes(q.k);
  cost.messages = 2.0 * rounds;
  cost.seconds = rounds * (q.alpha_seconds + up * q.seconds_per_byte) + rounds * (q.alpha_seconds + down * q.seconds_per_byte);
  cost.bytes_per_worker = rounds * down;
  return cost;
}

RankTraffic traffic(int workers, int rank, std::size_t, std::size_t k) {
  RankTraffic t;
  if (rank != 0) {  // one message up to the parent
    t.bytes += wire::sparse_message_bytes(k);
    ++t.messages;
  }
  // One broadcast message to each child: rank r + m for each power of two m below r's lowest set
  // bit (every power of two for the root), inside [0, P).
  for (int m = 1; m < workers; m <<= 1) {
    if (rank != 0 && m >= (rank & -rank)) break;
    if (rank + m < workers) {
      t.bytes += wire::sparse_message_bytes(k, k);
      ++t.messages;
    }
  }
  return t;
}

}  // namespace

const AggregatorDescriptor& gtopk_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "gtopk",
      .wire_id = 3,
      .summary = "global top-k by a binomial-tree reduce and broadcast (the gTop-k paper's scheme)",
      .properties = {},
      .tag_count = 2,
      .make = construct<GtopkTree>,
      .reference = reference,
      .cost = cost,
      .traffic = traffic,
      .worker_memory = {.arrays = 2.2, .pairs = 16},
      // Entries that remember their contributors: about 25 pairs' worth an entry.
      .reference_memory = {.pairs = 50, .pairs_per_worker = 25},
      .result_memory = {.pairs = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
