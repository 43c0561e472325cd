// Ok-Topk's own cases beyond the conformance suite: magnitudes that tie at the k-th entry (the
// radix select's tie round), unions smaller than k, the dense sum as a second reference, the
// region repartition that must never change a result, and the split's waves.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/wrapper.hpp"

namespace sparsgd::collectives {
namespace {

// Worker w's selection of `count` distinct indices of n, with magnitudes from `magnitudes` (few
// distinct ones make ties), signs mixed.
std::vector<SparseVector> tied_selections(int p, std::size_t n, std::size_t count, std::vector<float> magnitudes,
                                          std::uint64_t seed) {
  std::vector<SparseVector> selections;
  for (int w = 0; w < p; ++w) {
    Rng rng(seed * 1000 + static_cast<std::uint64_t>(w));
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.next() % (n - i));
      std::swap(all[i], all[j]);
    }
    std::vector<std::uint32_t> picked(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count));
    std::sort(picked.begin(), picked.end());
    SparseVector s;
    s.dim = n;
    for (const std::uint32_t index : picked) {
      const float m = magnitudes[static_cast<std::size_t>(rng.next() % magnitudes.size())];
      s.indices.push_back(index);
      s.values.push_back(rng.next() % 2 ? m : -m);
    }
    selections.push_back(std::move(s));
  }
  return selections;
}

struct OkTopkRun {
  std::vector<Aggregation> results;
  std::vector<transport::TrafficCounters> traffic;
};

// One aggregator object per rank, called once per entry of `calls` (selections per rank).
OkTopkRun run_oktopk(int p, std::size_t k, const std::vector<std::vector<SparseVector>>& calls) {
  OkTopkRun run;
  run.results.resize(static_cast<std::size_t>(p) * calls.size());
  run.traffic.resize(static_cast<std::size_t>(p) * calls.size());
  transport::run_local_workers(p, [&](transport::Transport& t) {
    const auto aggregator = make_aggregator("oktopk");
    for (std::size_t c = 0; c < calls.size(); ++c) {
      const std::size_t at = c * static_cast<std::size_t>(p) + static_cast<std::size_t>(t.rank());
      const auto before = t.counters();
      aggregator->aggregate(t, calls[c][static_cast<std::size_t>(t.rank())], k, run.results[at]);
      run.traffic[at].bytes_sent = t.counters().bytes_sent - before.bytes_sent;
      run.traffic[at].messages_sent = t.counters().messages_sent - before.messages_sent;
    }
  });
  return run;
}

// The k largest |sum| of the dense sum of all selections (summed in rank order), ties by lower index.
SparseVector dense_topk(const std::vector<SparseVector>& selections, std::size_t k) {
  const std::size_t n = selections.front().dim;
  std::vector<float> sum(n, 0.0f);
  std::vector<char> present(n, 0);
  for (const SparseVector& s : selections) {
    for (std::size_t e = 0; e < s.size(); ++e) {
      sum[s.indices[e]] += s.values[e];
      present[s.indices[e]] = 1;
    }
  }
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (present[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return std::fabs(sum[a]) > std::fabs(sum[b]); });
  order.resize(std::min(order.size(), k));
  std::sort(order.begin(), order.end());
  SparseVector out;
  out.dim = n;
  for (const std::uint32_t i : order) {
    out.indices.push_back(i);
    out.values.push_back(sum[i]);
  }
  return out;
}

void expect_matches_references(int p, std::size_t k, const std::vector<SparseVector>& selections, const OkTopkRun& run,
                               std::size_t call, bool check_traffic, const std::string& where) {
  const AggregatorDescriptor& d = find_aggregator("oktopk");
  const ReferenceAggregation want = d.reference(selections, k);
  const SparseVector dense = dense_topk(selections, k);
  EXPECT_EQ(want.sum.indices, dense.indices) << where;
  for (int w = 0; w < p; ++w) {
    const Aggregation& got = run.results[call * static_cast<std::size_t>(p) + static_cast<std::size_t>(w)];
    const std::string at = where + " rank " + std::to_string(w);
    ASSERT_EQ(got.sum.indices, want.sum.indices) << at;
    ASSERT_EQ(got.sum.values, want.sum.values) << at;  // bitwise: the same rank order
    EXPECT_EQ(got.sum.values, dense.values) << at;
    EXPECT_EQ(got.consumed, want.consumed[static_cast<std::size_t>(w)]) << at;
    if (check_traffic) {
      const RankTraffic traffic = d.traffic_of(selections, k, w);
      const transport::TrafficCounters& seen = run.traffic[call * static_cast<std::size_t>(p) + static_cast<std::size_t>(w)];
      EXPECT_EQ(seen.bytes_sent, traffic.bytes) << at;
      EXPECT_EQ(seen.messages_sent, traffic.messages) << at;
    }
  }
}

TEST(OkTopk, TiesAtTheKthEntryGoToTheLowestIndices) {
  for (int p : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (const std::size_t count : {std::size_t{1}, std::size_t{12}, std::size_t{40}}) {
      // Two magnitudes only: the k-th sum ties with many others, in several regions.
      const auto selections = tied_selections(p, 300, count, {1.0f, 2.0f}, 17);
      // A selection may hold up to 1.25 k entries (threshold compressors), so k >= 0.8 count.
      for (const std::size_t k : {(4 * count + 4) / 5, count, std::size_t{45}}) {
        const OkTopkRun run = run_oktopk(p, k, {selections});
        expect_matches_references(p, k, selections, run, 0, true,
                                  "P=" + std::to_string(p) + " count=" + std::to_string(count) + " k=" + std::to_string(k));
      }
    }
  }
}

TEST(OkTopk, FewerEntriesThanKAreAllKept) {
  for (int p : {2, 3, 6}) {
    const auto selections = tied_selections(p, 1000, 5, {0.5f, 0.25f, 3.0f}, 5);
    const OkTopkRun run = run_oktopk(p, 100, {selections});
    expect_matches_references(p, 100, selections, run, 0, true, "P=" + std::to_string(p));
    EXPECT_EQ(run.results[0].consumed, std::vector<std::uint8_t>(5, 1));
  }
}

// A region's summed entries come out in index order either by sorting the touched ones (few in a
// wide region) or by one pass over the region's flags (many): both give the references' result.
// Sparse: n = 1M, 20 entries a worker (at most 20 P touched in a region 1M / P wide), and n = 4M,
// 1500 a worker (thousands touched: the vectorized sort's partitioning, not only its sorting networks
// for short arrays; at P = 7 the flags' pass). Dense: n = 1000, 300 a worker (most of each region
// touched). Two calls each, so that the flags and sums left behind by the first must be clear for the second.
TEST(OkTopk, SparseAndDenseRegionsGiveTheReferenceResult) {
  for (int p : {1, 2, 3, 4, 7}) {
    for (const auto& [n, count] : {std::pair<std::size_t, std::size_t>{1000000, 20}, {4000000, 1500}, {1000, 300}}) {
      const auto first = tied_selections(p, n, count, {0.5f, 0.25f, 3.0f, 1.0f}, 11);
      const auto second = tied_selections(p, n, count, {2.0f, 0.75f, 0.125f}, 12);
      const std::size_t k = count;
      const OkTopkRun run = run_oktopk(p, k, {first, second});
      const std::string where = "P=" + std::to_string(p) + " n=" + std::to_string(n);
      expect_matches_references(p, k, first, run, 0, true, where + " call 0");
      // Traffic only where the boundaries were computed (call 0): call 1 reuses the first call's.
      expect_matches_references(p, k, second, run, 1, false, where + " call 1");
    }
  }
}

// Boundaries are recomputed in call 0 and 64 and reused between: results never depend on them,
// even when the selections move to another part of the index space.
TEST(OkTopk, RepartitioningNeverChangesTheResult) {
  const int p = 5;
  const std::size_t n = 2000, k = 24;
  std::vector<std::vector<SparseVector>> calls;
  for (int c = 0; c < 70; ++c) {
    auto selections = tied_selections(p, n / 4, 30, {0.1f, 0.7f, 1.3f, 2.9f}, static_cast<std::uint64_t>(c) + 100);
    // Calls 10-69 shift the entries to the upper end, away from the regions cut in call 0.
    for (SparseVector& s : selections) {
      s.dim = n;
      if (c >= 10) {
        for (std::uint32_t& i : s.indices) i += static_cast<std::uint32_t>(3 * n / 4);
      }
    }
    calls.push_back(std::move(selections));
  }
  const OkTopkRun run = run_oktopk(p, k, calls);
  for (std::size_t c = 0; c < calls.size(); ++c) {
    // Calls 0 and 64 cut the regions anew, which the traffic model of a first call describes.
    expect_matches_references(p, k, calls[c], run, c, c == 0 || c == 64, "call " + std::to_string(c));
  }
}

// A worker's view that counts the receives it has posted and not yet finished: the most at once.
class CountsPostedReceives final : public transport::TransportWrapper {
 public:
  using TransportWrapper::TransportWrapper;
  int in_flight = 0;
  int most_in_flight = 0;
  void barrier() override { inner_.barrier(); }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override { inner_.send(peer, tag, data); }
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override {
    return inner_.recv(peer, tag, buffer, max_bytes);
  }
  std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                          std::vector<std::byte>& buffer, std::size_t max_bytes,
                          const transport::InFlightWork& while_in_flight) override {
    return inner_.sendrecv(send_peer, send_tag, data, recv_peer, recv_tag, buffer, max_bytes, while_in_flight);
  }
  std::unique_ptr<transport::PendingOperation> do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                            std::size_t max_bytes) override {
    most_in_flight = std::max(most_in_flight, ++in_flight);
    return std::make_unique<Counted>(*this, inner_.post_recv(peer, tag, buffer, max_bytes));
  }

 private:
  class Counted final : public transport::PendingOperation {
   public:
    Counted(CountsPostedReceives& owner, transport::Request request) : owner_(owner), request_(std::move(request)) {}
    std::size_t wait() override {
      const std::size_t bytes = request_.wait();
      --owner_.in_flight;
      return bytes;
    }
    void abandon() noexcept override { request_ = transport::Request(); }

   private:
    CountsPostedReceives& owner_;
    transport::Request request_;
  };
};

// The split goes in waves of 8 peers: no worker has more than 8 receives posted at once (which
// bounds MPI's staging buffers), however many workers, and the closed form pays one latency a wave.
TEST(OkTopk, TheSplitGoesInWavesOfEightPeers) {
  for (int p : {2, 9, 10, 17, 18, 33}) {
    const std::size_t n = 5000, k = 50;
    const auto selections = tied_selections(p, n, k, {0.5f, 1.5f, 2.5f, 3.5f, 4.5f}, 3);
    std::vector<int> most(static_cast<std::size_t>(p), 0);
    std::vector<Aggregation> results(static_cast<std::size_t>(p));
    transport::run_local_workers(p, [&](transport::Transport& t) {
      CountsPostedReceives counting(t);
      const auto aggregator = make_aggregator("oktopk");
      const auto w = static_cast<std::size_t>(t.rank());
      aggregator->aggregate(counting, selections[w], k, results[w]);
      most[w] = counting.most_in_flight;
      EXPECT_EQ(counting.in_flight, 0);
    });
    const ReferenceAggregation want = find_aggregator("oktopk").reference(selections, k);
    for (int w = 0; w < p; ++w) {
      EXPECT_EQ(results[static_cast<std::size_t>(w)].sum.indices, want.sum.indices) << "P=" << p;
      EXPECT_EQ(most[static_cast<std::size_t>(w)], std::min(p - 1, 8)) << "P=" << p << " rank " << w;
    }
  }
  // Latencies only: P = 9 and 10 share every other term (the same power of two below them), and
  // 17 and 18 too; each second pair has one wave more.
  auto latencies = [](int p) {
    CostQuery q;
    q.workers = p;
    q.n = 100000;
    q.k = 1000;
    q.alpha_seconds = 1.0;
    return find_aggregator("oktopk").cost(q);
  };
  EXPECT_EQ(latencies(10).messages, latencies(9).messages + 1);
  EXPECT_EQ(latencies(10).seconds, latencies(9).seconds + 1);
  EXPECT_EQ(latencies(18).messages, latencies(17).messages + 1);
}

}  // namespace
}  // namespace sparsgd::collectives
