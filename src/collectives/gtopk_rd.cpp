// gTop-k by recursive doubling (the authors' later variant): in round j each rank exchanges its
// set with rank XOR 2^j and both merge identically (addition commutes, ties break by index), so
// every rank ends with the global top-k and no broadcast is needed.
//
// Any P: the ranks beyond the largest power of two P' fold their set into rank - P' first and get
// the result back at the end (the authors' code fails for P = 3 or 6). Residual accounting is
// local: an entry is consumed iff its index stays in the rank's merged set through every round;
// a folded rank learns the same of its entries from a mask sent with the result.

#include "collectives/algorithms.hpp"
#include "collectives/sparse_merge.hpp"
#include "sparsgd/select/threshold.hpp"

namespace sparsgd::collectives {
namespace {

constexpr int kFoldTag = 500;
constexpr int kUnfoldTag = 501;
constexpr int kRoundTag = 510;

class GtopkRecursiveDoubling final : public Aggregator {
 public:
  std::string name() const override { return "gtopk-rd"; }
  std::uint32_t wire_id() const override { return kGtopkRecursiveDoubling; }

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    const std::size_t capacity = select::threshold_max_count(k);
    check_local_selection(local, k, capacity, "gtopk-rd");
    const int p = t.size();
    const int r = t.rank();
    const auto n32 = static_cast<std::uint32_t>(local.dim);
    const auto k32 = static_cast<std::uint32_t>(k);
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    const int extras = p - p2;
    out.dense = false;
    out.dense_sum.clear();

    if (r >= p2) {
      const int partner = r - p2;
      wire::encode_sparse(wire_id(), n32, k32, local.indices, local.values, {}, message_);
      t.send(partner, kFoldTag, message_);
      t.recv(partner, kUnfoldTag, message_, wire::sparse_message_bytes(capacity, capacity));
      wire::decode_sparse(message_, expectation(*this, local, k, capacity, partner), out.sum, out.consumed,
                          local.size());
      return;
    }

    current_ = local;
    own_.start(local.size());
    const bool has_folded = r < extras;
    if (has_folded) {
      t.recv(r + p2, kFoldTag, message_, wire::sparse_message_bytes(capacity));
      wire::decode_sparse(message_, expectation(*this, local, k, capacity, r + p2), incoming_, mask_, 0);
      merger_.merge(current_, incoming_, k, merged_, own_moves_, incoming_moves_);
      own_.follow(own_moves_);
      folded_.position = incoming_moves_;
      std::swap(current_, merged_);
    }
    int round = 0;
    for (int dist = 1; dist < p2; dist <<= 1, ++round) {
      const int partner = r ^ dist;
      wire::encode_sparse(wire_id(), n32, k32, current_.indices, current_.values, {}, message_);
      t.sendrecv(partner, kRoundTag + round, message_, partner, kRoundTag + round, reply_,
                 wire::sparse_message_bytes(capacity));
      wire::decode_sparse(reply_, expectation(*this, local, k, capacity, partner), incoming_, mask_, 0);
      merger_.merge(current_, incoming_, k, merged_, own_moves_, incoming_moves_);
      own_.follow(own_moves_);
      if (has_folded) folded_.follow(own_moves_);
      std::swap(current_, merged_);
    }
    std::swap(out.sum, current_);  // current_ is scratch: take its buffers rather than copy them
    out.consumed.resize(local.size());
    mark_live(own_.position, out.consumed.data());
    if (has_folded) {
      folded_mask_.resize(folded_.position.size());
      mark_live(folded_.position, folded_mask_.data());
      wire::encode_sparse(wire_id(), n32, k32, out.sum.indices, out.sum.values, folded_mask_, message_);
      t.send(r + p2, kUnfoldTag, message_);
    }
  }

 private:
  TopkMerger merger_;
  SparseVector current_, merged_, incoming_;
  TrackedEntries own_, folded_;
  std::vector<std::int32_t> own_moves_, incoming_moves_;
  std::vector<std::uint8_t> mask_, folded_mask_;
  std::vector<std::byte> message_, reply_;
};

}  // namespace

std::unique_ptr<Aggregator> make_gtopk_rd() { return std::make_unique<GtopkRecursiveDoubling>(); }

}  // namespace sparsgd::collectives
