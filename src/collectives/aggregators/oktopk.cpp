// Ok-Topk (Li and Hoefler, PPoPP 2022): the index space is cut into P regions, balanced by where
// the workers' selections lie; every rank sends each other rank the entries of its selection in
// that rank's region (P - 1 direct messages, in waves of at most kSplitWave), and each region's
// owner sums what it received, in rank order. The global top-k of the reduced regions is then
// selected exactly without moving any value: a distributed radix select over the magnitudes' bits, one
// allreduce of a histogram per digit (three digits, fewer when a bucket edge falls on the k-th
// entry), and one allreduce of per-rank tie counts when equal magnitudes straddle the k-th. The
// selected entries are gathered by recursive doubling. A rank sends about 2k(P - 1)/P pairs where
// gTop-k sends k log2 P, at the price of P - 1 + about 3 log2 P more messages.
//
// Semantics: the result is exactly the k largest |sums| of the summed selections (ties by lower
// index), each summed in rank order, so the serial reference reproduces it bitwise, and an entry
// is consumed iff its index is in the result (its owner summed every rank's value there). Region
// boundaries are the averages of the ranks' selection quantiles, recomputed on the first call and
// every kRepartitionPeriod calls (the authors' period): they move traffic between ranks, never the
// result. The authors reuse a global threshold between re-evaluations, so that their global count
// drifts from k; this selection is exact on every call instead.

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include <hwy/contrib/sort/vqsort.h>

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/blocks/count_allreduce.hpp"
#include "collectives/verification/reference_sets.hpp"
#include "collectives/blocks/region_order.hpp"
#include "collectives/blocks/tags.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/threshold.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& oktopk_aggregator();

namespace {

// Offsets in its tag block: the split to the region owners; its allreduces of counts (fold,
// unfold, then a round each); the allgather of the selected entries (fold, unfold, then a round each).
constexpr int kSplitTag = 0;
constexpr int kCountsTag = 1;
constexpr int kGatherTag = kCountsTag + 2 + kMaxRounds;
constexpr int kTagCount = kGatherTag + 2 + kMaxRounds;

constexpr std::uint64_t kRepartitionPeriod = 64;

// The split's messages go in waves: in wave w a rank sends to the ranks at distances
// [1 + w W, (w + 1) W] to its right and receives from the same distances to its left, and waits
// for the whole wave before the next. Every wave is a set of permutations, so no rank receives
// more than W messages at once (no incast on a switch) and a rank posts at most W receives (MPI's
// staging buffers: W times its region's largest part, not P - 1 times). The price is one latency
// a wave. The authors throttle at 4 (their allreducer.py); 8 keeps P <= 9 to one wave.
constexpr int kSplitWave = 8;

int split_waves(int p) { return p < 2 ? 0 : (p - 1 + kSplitWave - 1) / kSplitWave; }

// Wave w's distances [first, last): the one schedule that both the split and its cost follow.
struct WaveDistances {
  int first;
  int last;
};
WaveDistances split_wave(int p, int w) { return {1 + w * kSplitWave, std::min(p, 1 + (w + 1) * kSplitWave)}; }

// A finite float's magnitude as bits (sign cleared) orders like the magnitude. The radix select
// decides bits 30..21, then 20..10, then 9..0: histograms of 4, 8 and 4 KB.
struct Digit {
  int shift;
  int bits;
};
constexpr std::array<Digit, 3> kDigits{{{21, 10}, {10, 11}, {0, 10}}};

// What a rank contributes to the region boundaries: the indices at the j/P quantiles of its
// selection (j n / P where it selected nothing).
std::vector<std::uint64_t> selection_quantiles(std::span<const std::uint32_t> indices, std::size_t n, int p) {
  std::vector<std::uint64_t> q(static_cast<std::size_t>(p - 1));
  const std::size_t m = indices.size();
  for (int j = 1; j < p; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    q[jj - 1] = m > 0 ? indices[jj * m / static_cast<std::size_t>(p)]
                      : static_cast<std::uint64_t>(jj) * n / static_cast<std::uint64_t>(p);
  }
  return q;
}

// Region j is [bounds[j], bounds[j + 1]): the averages of the ranks' quantiles.
std::vector<std::uint32_t> bounds_from_quantile_sums(std::span<const std::uint64_t> sums, std::size_t n, int p) {
  std::vector<std::uint32_t> bounds(static_cast<std::size_t>(p + 1));
  bounds.front() = 0;
  bounds.back() = static_cast<std::uint32_t>(n);
  for (int j = 1; j < p; ++j) {
    bounds[static_cast<std::size_t>(j)] = static_cast<std::uint32_t>(sums[static_cast<std::size_t>(j - 1)] /
                                                                      static_cast<std::uint64_t>(p));
  }
  return bounds;
}

std::pair<std::size_t, std::size_t> slice_of(std::span<const std::uint32_t> indices, std::uint32_t begin,
                                             std::uint32_t end) {
  const auto lo = std::lower_bound(indices.begin(), indices.end(), begin);
  const auto hi = std::lower_bound(lo, indices.end(), end);
  return {static_cast<std::size_t>(lo - indices.begin()), static_cast<std::size_t>(hi - indices.begin())};
}

class OkTopk final : public DescribedAggregator<oktopk_aggregator> {
 public:
  explicit OkTopk(const AggregatorOptions& options)
      : coding_(options.index_coding), tags_(tag_block(oktopk_aggregator())) {}

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    const std::size_t capacity = select::threshold_max_count(k);
    check_local_selection(local, k, capacity, "oktopk");
    const int p = t.size();
    out.dense = false;
    out.dense_sum.clear();
    if (calls_++ % kRepartitionPeriod == 0 || bounds_.size() != static_cast<std::size_t>(p + 1) ||
        bounds_.back() != local.dim) {
      repartition(t, local);
    }
    reduce_region(t, local, k, capacity);
    select_global(t, local.dim, k);
    gather(t, local, k, out);
    // Every rank's value at a selected index is inside its sum.
    out.consumed.assign(local.size(), 0);
    std::size_t j = 0;
    for (std::size_t e = 0; e < local.size(); ++e) {
      while (j < out.sum.size() && out.sum.indices[j] < local.indices[e]) ++j;
      out.consumed[e] = j < out.sum.size() && out.sum.indices[j] == local.indices[e];
    }
  }

 private:
  void repartition(transport::Transport& t, const SparseVector& local) {
    const int p = t.size();
    std::vector<std::uint64_t> sums = selection_quantiles(local.indices, local.dim, p);
    allreduce_counts<std::uint64_t>(t, sums, static_cast<std::uint64_t>(local.dim) * static_cast<std::uint64_t>(p),
                                    tags_[kCountsTag]);
    bounds_ = bounds_from_quantile_sums(sums, local.dim, p);
    if (!std::is_sorted(bounds_.begin(), bounds_.end())) {
      throw transport::TransportError("rank " + std::to_string(t.rank()) +
                                      ": oktopk's region boundaries came out unordered: a rank sent corrupt quantiles");
    }
  }

  // Sends every other rank its region's part of the selection and sums this rank's region.
  void reduce_region(transport::Transport& t, const SparseVector& local, std::size_t k, std::size_t capacity) {
    const int p = t.size();
    const int r = t.rank();
    const auto n32 = static_cast<std::uint32_t>(local.dim);
    const auto k32 = static_cast<std::uint32_t>(k);
    const auto pu = static_cast<std::size_t>(p);
    const std::uint32_t begin = bounds_[static_cast<std::size_t>(r)];
    const std::uint32_t end = bounds_[static_cast<std::size_t>(r) + 1];
    received_.resize(pu);
    decoded_indices_.resize(pu);
    outgoing_.resize(pu);
    // This rank's selection in region j.
    auto local_part = [&](std::size_t j) -> SparseView {
      const auto [lo, hi] = slice_of(local.indices, bounds_[j], bounds_[j + 1]);
      return {local.dim, std::span(local.indices).subspan(lo, hi - lo), std::span(local.values).subspan(lo, hi - lo)};
    };
    parts_.assign(pu, SparseView{});
    parts_[static_cast<std::size_t>(r)] = local_part(static_cast<std::size_t>(r));
    // A part holds distinct indices of this rank's region, so no more than its width: at large P
    // that bounds each receive buffer far below a selection (at P = 1024, n = 2.5M and k = 25,000:
    // 20 KB instead of 200 KB).
    const std::size_t part_bytes = wire::max_sparse_message_bytes(std::min<std::size_t>(capacity, end - begin), 0, coding_);
    // Checks and decodes the parts of one wave while the next is on the wire.
    auto decode_wave = [&](int first, int last) {
      for (int i = first; i < last; ++i) {
        const int from = (r - i + p) % p;
        const auto fu = static_cast<std::size_t>(from);
        const SparseView part = wire::decode_sparse_view(
            received_[fu], expectation(*this, local, k, capacity, from, coding_), decoded_indices_[fu]);
        if (part.size() > 0 && (part.indices.front() < begin || part.indices.back() >= end)) {
          throw wire::WireError("oktopk: rank " + std::to_string(from) + " sent rank " + std::to_string(r) +
                                " an entry outside its region [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "): the ranks disagree on the region boundaries");
        }
        parts_[fu] = part;
      }
    };
    int previous = 1;
    for (int w = 0; w < split_waves(p); ++w) {
      const auto [first, last] = split_wave(p, w);
      requests_.clear();
      for (int i = first; i < last; ++i) {
        const int from = (r - i + p) % p;
        requests_.push_back(t.post_recv(from, tags_[kSplitTag], received_[static_cast<std::size_t>(from)], part_bytes));
      }
      for (int i = first; i < last; ++i) {
        const int to = (r + i) % p;
        const auto tu = static_cast<std::size_t>(to);
        const SparseView part = local_part(tu);
        wire::encode_sparse(wire_id(), n32, k32, part.indices, part.values, {}, outgoing_[tu], coding_);
        requests_.push_back(t.post_send(to, tags_[kSplitTag], outgoing_[tu]));
      }
      decode_wave(previous, first);
      wait_all(requests_);
      previous = first;
    }
    decode_wave(previous, p);

    const std::size_t width = end - begin;
    if (sums_.size() != width) {
      // Exactly the region, the old one freed first: the regions partition n, so the workers of a
      // process hold n sums in all, not n each (descriptor's arrays_shared). Widths change only
      // when the boundaries do.
      std::vector<float>().swap(sums_);
      std::vector<std::uint8_t>().swap(seen_);
      sums_.assign(width, 0.0f);
      seen_.assign(width, 0);
    }
    touched_.clear();
    // In rank order from 0.0f, as the reference sums.
    for (const SparseView& part : parts_) {
      for (std::size_t e = 0; e < part.size(); ++e) {
        const std::size_t at = part.indices[e] - begin;
        if (!seen_[at]) {
          seen_[at] = 1;
          touched_.push_back(part.indices[e]);
        }
        sums_[at] += part.values[e];
      }
    }
    region_.dim = local.dim;
    region_.resize(touched_.size());
    // Once error feedback spreads the workers' selections apart the union nears k entries a region
    // (P = 32, n = 25M, density 0.01: 250,000 of a 781,250-wide region): then the pass over the
    // flags is the cheaper order (region_order.hpp).
    order_touched(region_order_for(width, touched_.size()), seen_, touched_, begin, sorter_);
    take_ordered(touched_, begin, sums_, seen_, region_.indices, region_.values);
  }

  [[noreturn]] static void inconsistent(const transport::Transport& t) {
    throw transport::TransportError("rank " + std::to_string(t.rank()) +
                                    ": oktopk's global magnitude counts are inconsistent: a rank sent corrupt counts");
  }

  // The region's entries among the global top-k, into selected_.
  void select_global(transport::Transport& t, std::size_t n, std::size_t k) {
    const int p = t.size();
    const int r = t.rank();
    keys_.resize(region_.size());
    for (std::size_t e = 0; e < region_.size(); ++e) keys_[e] = select::magnitude_key(region_.values[e]);
    // The regions are disjoint, so no honest count exceeds n.
    const auto limit = static_cast<std::uint64_t>(n);
    std::uint64_t need = k;      // how many entries the keys matching `resolved` must still give
    std::uint32_t resolved = 0;  // the key bits decided so far
    std::uint32_t floor = 0;     // every key >= floor is selected; with ties, keys == floor only in part
    bool exact_count = false;
    for (std::size_t d = 0; d < kDigits.size() && !exact_count; ++d) {
      const Digit digit = kDigits[d];
      const int above = digit.shift + digit.bits;
      const std::uint32_t mask = (1u << digit.bits) - 1;
      histogram_.assign(std::size_t{1} << digit.bits, 0);
      for (const std::uint32_t key : keys_) {
        if ((key >> above) == resolved) ++histogram_[(key >> digit.shift) & mask];
      }
      allreduce_counts<std::uint32_t>(t, histogram_, limit, tags_[kCountsTag]);
      if (d == 0) {
        const std::uint64_t total = std::accumulate(histogram_.begin(), histogram_.end(), std::uint64_t{0});
        if (total <= need) {  // the union holds at most k entries: all of them
          floor = 0;
          exact_count = true;
          break;
        }
      }
      std::uint64_t higher = 0;
      std::size_t bucket = histogram_.size();
      for (std::size_t b = histogram_.size(); b-- > 0;) {
        if (higher + histogram_[b] >= need) {
          bucket = b;
          break;
        }
        higher += histogram_[b];
      }
      if (bucket == histogram_.size()) inconsistent(t);
      need -= higher;
      resolved = (resolved << digit.bits) | static_cast<std::uint32_t>(bucket);
      floor = resolved << digit.shift;
      exact_count = histogram_[bucket] == need;
    }
    selected_.dim = region_.dim;
    selected_.indices.clear();
    selected_.values.clear();
    // All bits decided and more entries equal the k-th magnitude than are needed: the lowest
    // indices among them, across regions in rank order.
    std::uint64_t take_equal = 0;
    if (!exact_count) {
      const std::uint64_t mine = static_cast<std::uint64_t>(std::count(keys_.begin(), keys_.end(), floor));
      std::vector<std::uint64_t> equal(static_cast<std::size_t>(p), 0);
      equal[static_cast<std::size_t>(r)] = mine;
      allreduce_counts<std::uint64_t>(t, equal, limit, tags_[kCountsTag]);
      const std::uint64_t before =
          std::accumulate(equal.begin(), equal.begin() + r, std::uint64_t{0});
      if (std::accumulate(equal.begin(), equal.end(), std::uint64_t{0}) < need) inconsistent(t);
      take_equal = need > before ? std::min(mine, need - before) : 0;
    }
    for (std::size_t e = 0; e < region_.size(); ++e) {
      bool take = keys_[e] >= floor;
      if (!exact_count && keys_[e] == floor) {
        take = take_equal > 0;
        if (take) --take_equal;
      }
      if (take) {
        selected_.indices.push_back(region_.indices[e]);
        selected_.values.push_back(region_.values[e]);
      }
    }
  }

  // out.sum = the union of every rank's selected_, by recursive doubling (disjoint sets: merging
  // by index keeps them ascending whatever the order they arrive in).
  void gather(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) {
    const int p = t.size();
    const int r = t.rank();
    const int p2 = closed_form::power_of_two_floor(p);
    const auto n32 = static_cast<std::uint32_t>(local.dim);
    const auto k32 = static_cast<std::uint32_t>(k);
    const std::size_t max_bytes = wire::max_sparse_message_bytes(k, 0, coding_);
    auto expect = [&](int from) { return expectation(*this, local, k, k, from, coding_); };
    if (r >= p2) {
      wire::encode_sparse(wire_id(), n32, k32, selected_.indices, selected_.values, {}, message_, coding_);
      t.send(r - p2, tags_[kGatherTag], message_);
      t.recv(r - p2, tags_[kGatherTag + 1], reply_, max_bytes);
      wire::decode_sparse(reply_, expect(r - p2), out.sum, mask_, 0);
      return;
    }
    out.sum.dim = local.dim;
    out.sum.indices = selected_.indices;
    out.sum.values = selected_.values;
    auto merge_in = [&](int from) {
      const SparseView incoming = wire::decode_sparse_view(reply_, expect(from), incoming_indices_);
      merged_.dim = local.dim;
      merged_.indices.clear();
      merged_.values.clear();
      std::size_t a = 0, b = 0;
      while (a < out.sum.size() || b < incoming.size()) {
        const bool from_own = b == incoming.size() || (a < out.sum.size() && out.sum.indices[a] < incoming.indices[b]);
        if (!from_own && a < out.sum.size() && out.sum.indices[a] == incoming.indices[b]) {
          throw wire::WireError("oktopk: rank " + std::to_string(from) + " sent index " +
                                std::to_string(incoming.indices[b]) + ", which rank " + std::to_string(r) +
                                " already holds: the ranks' regions overlap");
        }
        merged_.indices.push_back(from_own ? out.sum.indices[a] : incoming.indices[b]);
        merged_.values.push_back(from_own ? out.sum.values[a++] : incoming.values[b++]);
      }
      if (merged_.size() > k) {
        throw wire::WireError("oktopk: rank " + std::to_string(from) + " sent rank " + std::to_string(r) +
                              " entries beyond the k = " + std::to_string(k) + " of the global selection");
      }
      std::swap(out.sum, merged_);
    };
    if (r + p2 < p) {
      t.recv(r + p2, tags_[kGatherTag], reply_, max_bytes);
      merge_in(r + p2);
    }
    int round = 0;
    for (int dist = 1; dist < p2; dist <<= 1, ++round) {
      const int partner = r ^ dist;
      wire::encode_sparse(wire_id(), n32, k32, out.sum.indices, out.sum.values, {}, message_, coding_);
      t.sendrecv(partner, tags_[kGatherTag + 2 + round], message_, partner, tags_[kGatherTag + 2 + round], reply_,
                 max_bytes);
      merge_in(partner);
    }
    if (r + p2 < p) {
      wire::encode_sparse(wire_id(), n32, k32, out.sum.indices, out.sum.values, {}, message_, coding_);
      t.send(r + p2, tags_[kGatherTag + 1], message_);
    }
  }

  wire::IndexCoding coding_;
  TagBlock tags_;
  std::uint64_t calls_ = 0;
  std::vector<std::uint32_t> bounds_;
  std::vector<std::vector<std::byte>> received_, outgoing_;
  std::vector<std::vector<std::uint32_t>> decoded_indices_;
  std::vector<SparseView> parts_;  // each rank's part of this region, into received_ or the selection
  std::vector<transport::Request> requests_;
  std::vector<float> sums_;         // this rank's region, dense, zero between calls
  std::vector<std::uint8_t> seen_;  // which of sums_ this call touched
  std::vector<std::uint32_t> touched_, keys_, histogram_, incoming_indices_;
  hwy::Sorter sorter_;  // its scratch buffer, made once
  SparseVector region_, selected_, merged_;
  std::vector<std::uint8_t> mask_;
  std::vector<std::byte> message_, reply_;
};

// Every selection summed in rank order (from 0.0f, as the region owners sum), then the k largest
// |sums|, ties by lower index.
ReferenceAggregation reference(const std::vector<SparseVector>& selections, std::size_t k) {
  reference_sets::Set total;
  for (std::size_t w = 0; w < selections.size(); ++w) {
    const SparseVector& s = selections[w];
    for (std::size_t e = 0; e < s.size(); ++e) {
      reference_sets::Pair& pair = total[s.indices[e]];
      pair.value += s.values[e];
      pair.from.push_back({static_cast<int>(w), e});
    }
  }
  return reference_sets::from_final_set(reference_sets::merge_topk(total, {}, k), selections);
}

// The balanced case: every rank's k entries spread evenly over the regions, and the k selected
// entries too; all three digits of the radix select (fewer are needed when a bucket edge falls on
// the k-th entry, which small k makes likely), no tie round, no repartition (once in 64 calls).
CommCost cost(const CostQuery& q) {
  CommCost cost;
  const int p = q.workers;
  if (p == 1) return cost;
  const double pd = p;
  const int p2 = closed_form::power_of_two_floor(p);
  const int rounds = closed_form::ceil_log2(p2);
  CostQuery region = q;  // one region's part of a selection: k/P entries among n/P indices
  region.k = (q.k + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p);
  region.n = std::max<std::size_t>(q.n / static_cast<std::size_t>(p), region.k);
  // The P - 1 parts go in waves: those of a wave leave back to back and their latencies overlap,
  // so the split costs one alpha a wave on the critical path.
  const double split = region.sparse_message_bytes();
  const int waves = split_waves(p);
  cost.messages += waves;
  cost.bytes_per_worker += (pd - 1) * split;
  cost.seconds += waves * q.alpha_seconds + (pd - 1) * split * q.seconds_per_byte;
  const int count_messages = count_allreduce_critical_messages(p);
  for (const Digit& digit : kDigits) {
    const double bytes = 4.0 * static_cast<double>(std::size_t{1} << digit.bits);
    cost.messages += count_messages;
    cost.bytes_per_worker += (rounds + (p2 != p ? 1 : 0)) * bytes;
    cost.seconds += count_messages * (q.alpha_seconds + bytes * q.seconds_per_byte);
  }
  // The gather: the fold of a region's share, rounds of doubling groups of shares, the unfold of
  // all k. Rank 0 is the busiest: its group holds the most folded shares in every round.
  auto gathered = [&](double fraction) {
    CostQuery part = q;
    part.k = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(q.k)));
    return part.sparse_message_bytes();
  };
  const int extras = p - p2;
  for (int j = 0; j < rounds; ++j) {
    const double bytes = gathered(static_cast<double>((1 << j) + std::min(1 << j, extras)) / pd);
    cost.messages += 1;
    cost.bytes_per_worker += bytes;
    cost.seconds += q.alpha_seconds + bytes * q.seconds_per_byte;
  }
  if (p2 != p) {
    const double fold = gathered(1.0 / pd), all = q.sparse_message_bytes();
    cost.messages += 2;
    cost.bytes_per_worker += all;
    cost.seconds += 2 * q.alpha_seconds + (fold + all) * q.seconds_per_byte;
  }
  return cost;
}

// What `rank` sends in the first call on these selections, from the algorithm's schedule: the
// repartition, the split, the rounds of the radix select the global magnitudes need, the gather.
RankTraffic traffic_of(const std::vector<SparseVector>& selections, std::size_t k, int rank) {
  const int p = static_cast<int>(selections.size());
  if (p < 2) return {};
  const std::size_t n = selections.front().dim;
  const auto pu = static_cast<std::size_t>(p);
  RankTraffic total;
  auto add = [&](const RankTraffic& t) {
    total.bytes += t.bytes;
    total.messages += t.messages;
  };
  // Boundaries: the quantile sums.
  std::vector<std::uint64_t> sums(pu - 1, 0);
  for (const SparseVector& s : selections) {
    const auto q = selection_quantiles(s.indices, n, p);
    for (std::size_t j = 0; j + 1 < pu; ++j) sums[j] += q[j];
  }
  add(count_allreduce_traffic(p, rank, (pu - 1) * 8));
  const std::vector<std::uint32_t> bounds = bounds_from_quantile_sums(sums, n, p);
  const SparseVector& mine = selections[static_cast<std::size_t>(rank)];
  for (int j = 0; j < p; ++j) {
    if (j == rank) continue;
    const auto [lo, hi] = slice_of(mine.indices, bounds[static_cast<std::size_t>(j)], bounds[static_cast<std::size_t>(j) + 1]);
    add({wire::sparse_message_bytes(hi - lo), 1});
  }
  // The radix select: the k-th largest key of the summed union decides how many digits are needed.
  const ReferenceAggregation result = reference(selections, k);
  std::map<std::uint32_t, float> sum;
  for (const SparseVector& s : selections) {
    for (std::size_t e = 0; e < s.size(); ++e) sum[s.indices[e]] += s.values[e];
  }
  std::vector<std::uint32_t> keys;
  for (const auto& [index, value] : sum) keys.push_back(select::magnitude_key(value));
  std::sort(keys.rbegin(), keys.rend());
  std::size_t digits = 1;
  bool tie_round = false;
  if (keys.size() > k) {
    const std::uint32_t kth = keys[k - 1];
    digits = 0;
    for (const Digit& digit : kDigits) {
      ++digits;
      const std::uint32_t floor = (kth >> digit.shift) << digit.shift;
      const auto at_or_above = static_cast<std::size_t>(std::count_if(keys.begin(), keys.end(), [&](std::uint32_t key) {
        return key >= floor;
      }));
      if (at_or_above == k) break;
      if (digit.shift == 0) tie_round = true;
    }
  }
  for (std::size_t d = 0; d < digits; ++d) {
    add(count_allreduce_traffic(p, rank, 4 * (std::size_t{1} << kDigits[d].bits)));
  }
  if (tie_round) add(count_allreduce_traffic(p, rank, 8 * pu));
  // The gather: each rank holds its region's selected entries, then its group's.
  std::vector<std::size_t> held(pu, 0);
  for (const std::uint32_t index : result.sum.indices) {
    const auto region = static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), index) - bounds.begin()) - 1;
    ++held[region];
  }
  const int p2 = closed_form::power_of_two_floor(p);
  if (rank >= p2) {
    add({wire::sparse_message_bytes(held[static_cast<std::size_t>(rank)]), 1});
    return total;
  }
  for (int r = p2; r < p; ++r) held[static_cast<std::size_t>(r - p2)] += held[static_cast<std::size_t>(r)];
  for (int dist = 1; dist < p2; dist <<= 1) {
    const int group = rank & ~(dist - 1);
    std::size_t count = 0;
    for (int r = group; r < group + dist; ++r) count += held[static_cast<std::size_t>(r)];
    add({wire::sparse_message_bytes(count), 1});
  }
  if (rank + p2 < p) add({wire::sparse_message_bytes(result.sum.size()), 1});
  return total;
}

}  // namespace

const AggregatorDescriptor& oktopk_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "oktopk",
      .wire_id = 6,
      .summary = "exact global top-k of the sum: regions reduced by their owners, then gathered (Ok-Topk, any P)",
      .properties = {.auto_rank = 2},
      .tag_count = kTagCount,
      .make = construct<OkTopk>,
      .reference = reference,
      .cost = cost,
      .traffic = nullptr,
      .traffic_of = traffic_of,
      // Gradient, residual, received parts; the regions' dense sums and touched flags (5 bytes an
      // index) partition n: 1.25 arrays in all, twice while ranks move to new boundaries.
      // Over MPI a wave's posted receives hold up to k pairs each.
      .worker_memory = {.arrays = 2.1, .pairs = 8, .arrays_shared = 2.5, .posted_receives = kSplitWave},
      .reference_memory = {.pairs = 50, .pairs_per_worker = 25},
      .result_memory = {.pairs = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
