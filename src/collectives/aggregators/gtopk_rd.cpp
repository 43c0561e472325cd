// gTop-k by recursive doubling (the authors' later variant): in round j each rank exchanges its
// set with rank XOR 2^j and both merge identically (addition commutes, ties break by index), so
// every rank ends with the global top-k and no broadcast is needed.
//
// Any P: the ranks beyond the largest power of two P' fold their set into rank - P' first and get
// the result back at the end (the authors' code fails for P = 3 or 6). Residual accounting is
// local: an entry is consumed iff its index stays in the rank's merged set through every round;
// a folded rank learns the same of its entries from a mask sent with the result. That tracking is
// off the critical path: it runs while the next round's messages are in flight, and after the last
// merge only survival is asked, not positions.

#include <algorithm>
#include <bit>
#include <vector>

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/verification/reference_sets.hpp"
#include "collectives/blocks/sparse_merge.hpp"
#include "sparsgd/select/threshold.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& gtopk_rd_aggregator();

namespace {

// Offsets in its tag block: round r of the doubling uses kRoundTag + r.
constexpr int kFoldTag = 0;
constexpr int kUnfoldTag = 1;
constexpr int kRoundTag = 2;

class GtopkRecursiveDoubling final : public DescribedAggregator<gtopk_rd_aggregator> {
 public:
  explicit GtopkRecursiveDoubling(const AggregatorOptions& options)
      : coding_(options.index_coding), tags_(tag_block(gtopk_rd_aggregator())) {}

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    const std::size_t capacity = select::threshold_max_count(k);
    check_local_selection(local, k, capacity, "gtopk-rd");
    const int p = t.size();
    const int r = t.rank();
    const auto n32 = static_cast<std::uint32_t>(local.dim);
    const auto k32 = static_cast<std::uint32_t>(k);
    const int p2 = closed_form::power_of_two_floor(p);
    const int extras = p - p2;
    out.dense = false;
    out.dense_sum.clear();

    if (r >= p2) {
      const int partner = r - p2;
      wire::encode_sparse(wire_id(), n32, k32, local.indices, local.values, {}, message_, coding_);
      t.send(partner, tags_[kFoldTag], message_);
      t.recv(partner, tags_[kUnfoldTag], message_, wire::max_sparse_message_bytes(capacity, capacity, coding_));
      wire::decode_sparse(message_, expectation(*this, local, k, capacity, partner, coding_), out.sum, out.consumed,
                          local.size());
      return;
    }

    // Where the rank's own entries are is first needed when the first merge is settled, in flight.
    bool own_started = false;
    auto start_own = [&] {
      if (!own_started) own_.start(local.size());
      own_started = true;
    };
    const bool has_folded = r < extras;
    if (p2 == 1) out.sum = local;  // one rank: no partner
    // The current set lives where the last merge wrote it: in the next message to send (encoded in
    // place, so no copy before sending) or, after the last merge, in out.sum. Before any merge it is
    // the caller's selection, until it is encoded for the first send.
    SparseView current = view_of(local);
    float* current_writable = nullptr;  // current's values, once they are this rank's own buffer
    const std::vector<std::byte>* encoded = nullptr;
    int spare = 0;  // which of outgoing_ the next merge writes into
    const bool coded = coding_ == wire::IndexCoding::compressed;
    int merged_spare = 0;  // with compressed indices, which of merged_ the next merge writes into
    std::size_t merges_left = static_cast<std::size_t>(has_folded) + static_cast<std::size_t>(std::countr_zero(
                                                                         static_cast<unsigned>(p2)));
    // Where the entries went in a merge is worked out later, while the next message is in flight:
    // only the merged set itself is on the critical path.
    bool settled = true;
    bool tracked_incoming = false;
    auto settle = [&] {
      if (settled) return;
      merger_.positions(own_moves_, tracked_incoming ? &incoming_moves_ : nullptr);
      start_own();
      own_.follow(own_moves_);
      if (tracked_incoming) {
        folded_.position = incoming_moves_;
      } else if (has_folded) {
        folded_.follow(own_moves_);
      }
      settled = true;
    };
    auto merge_in = [&](SparseView incoming, bool track_incoming) {
      const bool last = --merges_left == 0;
      std::vector<std::byte>& target = outgoing_[spare];
      TopkMerger::Destination written{};
      const std::size_t m = merger_.merge(
          current, incoming, k,
          [&](std::size_t size) {
            if (last) {
              out.sum.dim = local.dim;
              out.sum.resize(size);
              written = {out.sum.indices.data(), out.sum.values.data()};
            } else if (coded) {
              // Compressed indices cannot be written in place: the set goes to scratch, then is
              // encoded. Not the scratch the current set may lie in.
              SparseVector& scratch = merged_[merged_spare];
              scratch.dim = local.dim;
              scratch.resize(size);
              written = {scratch.indices.data(), scratch.values.data()};
            } else {
              // Into the received message's buffer: the merge has read it just now (compaction
              // copies what it keeps), so it is in cache where the spare one is not.
              const wire::SparseSlots slots = wire::prepare_sparse(wire_id(), n32, k32, size, reply_);
              written = {slots.indices, slots.values};
            }
            return written;
          },
          // The received set lies in reply_, this rank's own buffer, which nothing reads after the merge.
          {current_writable, const_cast<float*>(incoming.values.data())},
          track_incoming ? TopkMerger::Track::own_and_incoming : TopkMerger::Track::own);
      settled = false;
      tracked_incoming = track_incoming;
      if (!last) {
        if (coded) {
          wire::encode_sparse(wire_id(), n32, k32, {written.indices, m}, {written.values, m}, {}, target, coding_);
          merged_spare ^= 1;
        } else {
          target.swap(reply_);
        }
        current = {local.dim, {written.indices, m}, {written.values, m}};
        current_writable = written.values;  // sent before the next merge reads it, so free to change
        encoded = &target;
        spare ^= 1;
      }
    };
    if (has_folded) {
      t.recv(r + p2, tags_[kFoldTag], reply_, wire::max_sparse_message_bytes(capacity, 0, coding_));
      merge_in(wire::decode_sparse_view(reply_, expectation(*this, local, k, capacity, r + p2, coding_),
                                        incoming_indices_),
               true);
    }
    int round = 0;
    for (int dist = 1; dist < p2; dist <<= 1, ++round) {
      const int partner = r ^ dist;
      if (encoded == nullptr) {
        // The caller's selection goes out as it is. The message then holds the current set, in this
        // rank's own buffer, so the first merge patches shared indices there instead of in copies.
        const std::size_t size = current.size();
        const wire::SparseSlots slots =
            wire::encode_sparse(wire_id(), n32, k32, current.indices, current.values, {}, outgoing_[spare], coding_);
        // Compressed, the indices stay where they were (the caller's, or scratch), unchanged.
        current = {local.dim, {coded ? current.indices.data() : slots.indices, size}, {slots.values, size}};
        current_writable = slots.values;
        encoded = &outgoing_[spare];
        spare ^= 1;
      }
      t.sendrecv(partner, tags_[kRoundTag + round], *encoded, partner, tags_[kRoundTag + round], reply_,
                 wire::max_sparse_message_bytes(capacity, 0, coding_), settle);
      settle();  // a no-op once the work in flight has run; correctness does not rest on it running
      merge_in(wire::decode_sparse_view(reply_, expectation(*this, local, k, capacity, partner, coding_),
                                        incoming_indices_),
               false);
    }
    // Of the last merge, only which entries made the cut matters, not where they went (unless it
    // brought in the folded rank's entries, whose positions it sets).
    const bool last_pending = !settled && !tracked_incoming;
    if (last_pending) {
      merger_.own_survived(survived_);
    } else {
      settle();
    }
    auto mark_consumed = [&](const TrackedEntries& entries, std::uint8_t* flags) {
      if (last_pending) {
        mark_surviving(entries.position, survived_, flags);
      } else {
        mark_live(entries.position, flags);
      }
    };
    start_own();
    out.consumed.resize(local.size());
    mark_consumed(own_, out.consumed.data());
    if (has_folded) {
      folded_mask_.resize(folded_.position.size());
      mark_consumed(folded_, folded_mask_.data());
      wire::encode_sparse(wire_id(), n32, k32, out.sum.indices, out.sum.values, folded_mask_, outgoing_[0], coding_);
      t.send(r + p2, tags_[kUnfoldTag], outgoing_[0]);
    }
  }

 private:
  wire::IndexCoding coding_;
  TagBlock tags_;
  TopkMerger merger_;
  TrackedEntries own_, folded_;
  // With compressed indices: the received set's decoded indices, and the merged sets (alternating,
  // so that a merge never writes where its own input lies).
  std::vector<std::uint32_t> incoming_indices_;
  SparseVector merged_[2];
  std::vector<std::int32_t> own_moves_, incoming_moves_;
  std::vector<std::uint8_t> folded_mask_, survived_;
  std::vector<std::byte> message_, reply_;
  std::vector<std::byte> outgoing_[2];  // the message being sent and the one the next merge writes
};

ReferenceAggregation reference(const std::vector<SparseVector>& selections, std::size_t k) {
  using reference_sets::merge_topk;
  std::vector<reference_sets::Set> sets = reference_sets::to_sets(selections);
  const int p = static_cast<int>(sets.size());
  const int p2 = closed_form::power_of_two_floor(p);
  for (int r = 0; r + p2 < p; ++r) sets[r] = merge_topk(sets[r], sets[r + p2], k);
  // Partners merge the same two sets (a + b == b + a in floating point, ties go by index), so after
  // the round of distance d the ranks of each aligned group of 2d hold one set: its lowest rank's,
  // the only one merged here. That makes the replay O(k P log P) entries instead of O(k P^2).
  for (int dist = 1; dist < p2; dist <<= 1) {
    for (int r = 0; r < p2; r += 2 * dist) sets[r] = merge_topk(sets[r], sets[r + dist], k);
  }
  return reference_sets::from_final_set(sets[0], selections);
}

// The schedule's critical path, message by message. A rank sends its set of a round when it has
// merged the last (a folded rank first waits for the fold) and is done with the round when its
// partner's message has arrived; a send holds the sender for its bytes, a message arrives alpha
// after its last byte left. So the ranks with no fold run their first rounds a hop ahead, and when
// P is not a power of two the path is not fold + rounds + unfold: at P = 6, rank 0's last partner
// (rank 2) had no fold, rank 0 is done after 2 hops and its unfold arrives after 3, as does rank
// 2's last message; at P = 7, whose rank 2 is folded too, it takes 4.
struct CriticalPath {
  double seconds = 0.0;
  int hops = 0;  // messages along it: the latency terms
};

CriticalPath critical_path(int workers, double alpha, double send_seconds, double unfold_send_seconds) {
  const int p2 = closed_form::power_of_two_floor(workers);
  const int extras = workers - p2;
  const double hop = alpha + send_seconds;
  std::vector<CriticalPath> ready(static_cast<std::size_t>(p2)), next(ready.size());
  for (int r = 0; r < extras; ++r) ready[static_cast<std::size_t>(r)] = {hop, 1};
  const auto later = [](const CriticalPath& a, const CriticalPath& b) {
    return a.seconds != b.seconds ? (a.seconds > b.seconds ? a : b) : (a.hops >= b.hops ? a : b);
  };
  for (int dist = 1; dist < p2; dist <<= 1) {
    for (int r = 0; r < p2; ++r) {
      const CriticalPath& mine = ready[static_cast<std::size_t>(r)];
      const CriticalPath& theirs = ready[static_cast<std::size_t>(r ^ dist)];
      next[static_cast<std::size_t>(r)] =
          later({mine.seconds + send_seconds, mine.hops}, {theirs.seconds + hop, theirs.hops + 1});
    }
    ready.swap(next);
  }
  CriticalPath end;
  for (int r = 0; r < p2; ++r) end = later(end, ready[static_cast<std::size_t>(r)]);
  for (int r = 0; r < extras; ++r) {
    const CriticalPath& done = ready[static_cast<std::size_t>(r)];
    end = later(end, {done.seconds + alpha + unfold_send_seconds, done.hops + 1});
  }
  return end;
}

// log2 P' rounds of k pairs; when P is not a power of two, a fold (k pairs) before them and an
// unfold (k pairs and a k-bit mask) after, which the rounds of the ranks without a fold overlap.
CommCost cost(const CostQuery& q) {
  CommCost cost;
  if (q.workers == 1) return cost;
  const int p2 = closed_form::power_of_two_floor(q.workers);
  const int rounds = closed_form::ceil_log2(p2);
  const double pairs = q.sparse_message_bytes();
  const double down = q.sparse_message_bytes(q.k);
  cost.bytes_per_worker = rounds * pairs + (p2 != q.workers ? down : 0.0);
  const CriticalPath path = critical_path(q.workers, q.alpha_seconds, pairs * q.seconds_per_byte, down * q.seconds_per_byte);
  cost.seconds = path.seconds;
  cost.messages = path.hops;
  return cost;
}

RankTraffic traffic(int workers, int rank, std::size_t, std::size_t k) {
  const int p2 = closed_form::power_of_two_floor(workers);
  if (rank >= p2) return {wire::sparse_message_bytes(k), 1};  // the fold only
  RankTraffic t;
  for (int dist = 1; dist < p2; dist <<= 1) {
    t.bytes += wire::sparse_message_bytes(k);
    ++t.messages;
  }
  if (rank < workers - p2) {  // the unfold
    t.bytes += wire::sparse_message_bytes(k, k);
    ++t.messages;
  }
  return t;
}

}  // namespace

const AggregatorDescriptor& gtopk_rd_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "gtopk-rd",
      .wire_id = 4,
      .summary = "global top-k by recursive doubling, every rank merging (gTop-k, any P)",
      .properties = {.auto_rank = 1},
      .tag_count = 2 + kMaxRounds,
      .make = construct<GtopkRecursiveDoubling>,
      .reference = reference,
      .cost = cost,
      .traffic = traffic,
      .worker_memory = {.arrays = 2.2, .pairs = 16},
      .reference_memory = {.pairs = 50, .pairs_per_worker = 25},
      .result_memory = {.pairs = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
