#pragma once
// The aggregator conformance suite, shared by every transport's tests: every aggregator against the
// serial reference, for many worker counts, sizes, densities and compressors: the sum, exactly
// which local entries were consumed, conservation of gradient mass through error feedback, and
// the bytes each rank sends.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/closed_form_bytes.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/collectives/replay.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::testing {

using WorkerRunner = std::function<void(int, const std::function<void(transport::Transport&)>&)>;
using collectives::Aggregation;

struct Case {
  int workers;
  std::size_t n;
  double density;
  std::string compressor;
  std::string aggregator;
  bool error_feedback = true;
  bool compressed_indices = false;
};

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const auto identifier = [](std::string s) {
    for (char& ch : s) {
      if (ch == '-') ch = '_';
    }
    return s;
  };
  // A stream rather than string concatenation: GCC 12 warns falsely (-Wrestrict) on the latter.
  std::ostringstream name;
  name << 'P' << c.workers << "_n" << c.n << "_d" << std::lround(c.density * 10000) << '_' << identifier(c.compressor)
       << '_' << identifier(c.aggregator) << (c.error_feedback ? "" : "_noef") << (c.compressed_indices ? "_ci" : "");
  return name.str();
}

// Runs case `c` on workers started by `run_workers(P, worker)` (threads over any transport) and
// checks every result against the serial reference. `native_dense`: the transport sums the dense
// aggregator with its own allreduce (Transport::native_allreduce_sum), which it counts differently.
inline void check_aggregator_conformance(const Case& c, const WorkerRunner& run_workers, bool native_dense = false) {
  const std::size_t k = k_from_density(c.n, c.density);
  const int iterations = 3;
  collectives::ExchangeConfig config;
  config.compressor.name = c.compressor;
  config.compressor.seed = 7;
  config.compressor.shared_seed = collectives::find_aggregator(c.aggregator).properties.needs_shared_indices;
  config.aggregator = c.aggregator;
  config.density = c.density;
  config.error_feedback = c.error_feedback;
  config.index_coding = c.compressed_indices ? wire::IndexCoding::compressed : wire::IndexCoding::raw;
  // auto chooses for a given network here, so that its traffic is its choice's alone (the
  // ping-pong that measures one is tested on its own).
  if (collectives::find_aggregator(c.aggregator).properties.delegates) config.network = {1e-4, 1e-9, true, false};
  // What each worker saw, per iteration.
  struct Seen {
    std::vector<SparseVector> selection;
    std::vector<Aggregation> result;
    std::vector<std::vector<float>> residual_after;
    transport::TrafficCounters traffic_first;
    bool first_was_trial = false;  // auto: the first exchange timed a candidate
  };
  std::vector<Seen> seen(static_cast<std::size_t>(c.workers));
  run_workers(c.workers, [&](transport::Transport& t) {
    Seen& mine = seen[static_cast<std::size_t>(t.rank())];
    collectives::GradientExchange exchange(t, c.n, config);
    std::vector<float> gradient(c.n);
    for (int it = 0; it < iterations; ++it) {
      fill_gradient(gradient, 11, t.rank(), static_cast<std::uint64_t>(it));
      const auto before = t.counters();
      const Aggregation& result = exchange.exchange(gradient, static_cast<std::uint64_t>(it));
      if (it == 0) {
        const collectives::AutoDecision* decision = collectives::auto_decision(exchange.aggregator());
        mine.first_was_trial = decision != nullptr && decision->timed_exchanges == 1;
        mine.traffic_first.bytes_sent = t.counters().bytes_sent - before.bytes_sent;
        mine.traffic_first.messages_sent = t.counters().messages_sent - before.messages_sent;
      }
      mine.selection.push_back(exchange.last_selection());
      mine.result.push_back(result);
      const auto residual = exchange.feedback().residual();
      mine.residual_after.emplace_back(residual.begin(), residual.end());
    }
  });

  // The same steps replayed serially (collectives/replay.hpp): every worker's selection, the sum,
  // which entries it consumed and the residual it kept must be the replay's, and the mass that
  // left the residuals must be the sum (divided by an unbiased compressor's scale).
  collectives::ExchangeReplay replay(config, c.n, c.workers);
  for (int it = 0; it < iterations; ++it) {
    const auto ii = static_cast<std::size_t>(it);
    replay.step(
        static_cast<std::uint64_t>(it),
        [&](int w, std::span<float> out) { fill_gradient(out, 11, w, static_cast<std::uint64_t>(it)); },
        seen[0].result[ii].method);
    for (int w = 0; w < c.workers; ++w) {
      const Seen& s = seen[static_cast<std::size_t>(w)];
      const std::string where = "iteration " + std::to_string(it) + " worker " + std::to_string(w);
      ASSERT_EQ(s.selection[ii].indices, replay.selection(w).indices) << where;
      ASSERT_EQ(s.selection[ii].values, replay.selection(w).values) << where;
      ASSERT_EQ(replay.sum_difference(s.result[ii]), "") << where;
      ASSERT_EQ(s.result[ii].consumed, replay.reference().consumed[static_cast<std::size_t>(w)]) << where;
      const auto residual = replay.residual(w);
      ASSERT_TRUE(std::equal(residual.begin(), residual.end(), s.residual_after[ii].begin(), s.residual_after[ii].end()))
          << where << ": residual differs from the replay's";
    }
    EXPECT_LE(replay.conservation_error(seen[0].result[ii]), 1e-5) << "conservation at iteration " << it;
  }

  // Bytes and messages per rank against the closed form (exact-count compressors only).
  const compress::CompressorProperties& compressor = compress::find_compressor(c.compressor).properties;
  if (compressor.exact_count && !compressor.dense) {
    std::vector<SparseVector> first_selections;
    for (const Seen& s : seen) first_selections.push_back(s.selection.front());
    // What formed the sum: the aggregator, or the one auto chose.
    const std::string method = seen[0].result.front().method.empty() ? c.aggregator : std::string(seen[0].result.front().method);
    for (int w = 0; w < c.workers; ++w) {
      auto want = native_dense && method == "dense" ? native_allreduce_traffic(c.n, c.workers)
                                                    : expected_traffic(method, first_selections, w, k);
      const collectives::RankTraffic trial = seen[static_cast<std::size_t>(w)].first_was_trial
                                                  ? collectives::auto_trial_traffic(c.workers, w)
                                                  : collectives::RankTraffic{};
      want.messages += trial.messages;
      want.bytes += trial.bytes;
      const transport::TrafficCounters& got = seen[static_cast<std::size_t>(w)].traffic_first;
      EXPECT_EQ(got.messages_sent, want.messages) << "rank " << w;
      if (!c.compressed_indices || !collectives::find_aggregator(method).properties.sends_indices) {
        EXPECT_EQ(got.bytes_sent, want.bytes) << "rank " << w;
      } else {
        // Compressed indices never cost more than raw ones plus their 6 bytes of framing a set
        // (allgather forwards P - 1 sets in ceil(log2 P) messages), and save bytes whenever a rank
        // sends sets sparse enough for the Rice code. (Exact sizes: compressed_traffic_test.cpp.)
        const std::uint64_t sets = collectives::find_aggregator(method).properties.forwards_sets
                                       ? static_cast<std::uint64_t>(c.workers - 1) : want.messages;
        EXPECT_LE(got.bytes_sent, want.bytes + compressed_framing_bytes() * sets) << "rank " << w;
        if (want.messages > 0 && c.density <= 0.02 && k > 8) {
          EXPECT_LT(got.bytes_sent, want.bytes) << "rank " << w;
        }
      }
    }
  }
}

// Every registered aggregator (its descriptor says which compressors it takes and whether it sends
// indices), so that a new one is checked without touching this list.
inline std::vector<Case> all_cases() {
  std::vector<Case> cases;
  std::vector<std::string> shared, ordinary, with_indices;
  for (const collectives::AggregatorDescriptor* d : collectives::aggregator_descriptors()) {
    (d->properties.needs_shared_indices ? shared : ordinary).emplace_back(d->name);
    if (d->properties.sends_indices) with_indices.emplace_back(d->name);
  }
  const auto dense_result = [](const std::string& name) {
    return collectives::find_aggregator(name).properties.dense_result;
  };
  const int worker_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 32};
  for (const int p : worker_counts) {
    for (const std::string& agg : ordinary) {
      cases.push_back({p, 1000, 0.01, "topk", agg});
      if (dense_result(agg)) {
        cases.push_back({p, 1013, 1.0, "none", agg});
      } else {
        cases.push_back({p, 20011, 0.005, "topk", agg});
      }
    }
    for (const std::string& agg : shared) cases.push_back({p, 5000, 0.01, "randk", agg});
  }
  // Every compressor at awkward worker counts, including the threshold compressors whose counts
  // vary by worker, and tiny sizes.
  for (const int p : {3, 6, 8}) {
    for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
      const std::string comp(d->name);
      // topk is everywhere above; a compressor that scales its values needs error feedback off (below).
      if (comp == "topk" || d->properties.scales_values) continue;
      for (const std::string& agg : ordinary) {
        if (d->properties.dense && !dense_result(agg)) continue;
        cases.push_back({p, 3001, 0.02, comp, agg});
      }
    }
    for (const std::string& agg : with_indices) {
      cases.push_back({p, 1, 1.0, "topk", agg});
      cases.push_back({p, 7, 0.5, "topk", agg});
      cases.push_back({p, 40, 1.0, "topk", agg});
    }
  }
  // Without error feedback (every aggregator), and the unbiased random-k, which needs it off.
  for (const int p : {1, 2, 3, 5, 8, 16}) {
    for (const std::string& agg : ordinary) cases.push_back({p, 3001, 0.02, "topk", agg, false});
    for (const std::string& agg : shared) {
      cases.push_back({p, 5000, 0.01, "randk", agg, false});
      cases.push_back({p, 5000, 0.01, "randk-unbiased", agg, false});
    }
    for (const std::string& agg : with_indices) cases.push_back({p, 3001, 0.02, "randk-unbiased", agg, false});
    cases.push_back({p, 3001, 0.02, "rtopk", "gtopk-rd", false});  // rTop-k with gTop-k, which no paper measured
    cases.push_back({p, 1, 1.0, "randk-unbiased", "gtopk-rd", false});
  }
  // Compressed indices: every aggregator that sends indices, sparse sets (Rice codes), dense ones
  // (bitmaps) and tiny ones (raw), with and without error feedback.
  for (const int p : {1, 2, 3, 4, 5, 7, 8, 16, 17}) {
    for (const std::string& agg : with_indices) {
      cases.push_back({p, 20011, 0.005, "topk", agg, true, true});
      cases.push_back({p, 3001, 0.02, "randk", agg, true, true});
      cases.push_back({p, 40, 1.0, "topk", agg, true, true});
      cases.push_back({p, 1, 1.0, "topk", agg, true, true});
    }
    cases.push_back({p, 3001, 0.02, "rtopk", "gtopk-rd", false, true});
    cases.push_back({p, 3001, 0.02, "dgc", "gtopk", true, true});
  }
  // Ok-Topk at every worker count to 33, each with another compressor it accepts (all but none
  // and the shared random-k), so that every compressor meets many worker counts.
  std::vector<const compress::CompressorDescriptor*> sparse_compressors;
  for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
    if (!d->properties.dense) sparse_compressors.push_back(d);
  }
  for (int p = 1; p <= 33; ++p) {
    const compress::CompressorDescriptor* comp = sparse_compressors[static_cast<std::size_t>(p) % sparse_compressors.size()];
    cases.push_back({p, 4099, 0.02, std::string(comp->name), "oktopk", !comp->properties.scales_values});
  }
  return cases;
}

}  // namespace sparsgd::testing
