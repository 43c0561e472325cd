// The aggregator descriptors (collectives/descriptor.hpp): one registry with unique names and wire
// ids, factories that build what they describe, properties that the factory enforces, and two
// closed forms (cost on the critical path, traffic per rank) that agree with each other. That
// the traffic matches what a run sends is checked by the conformance suite.

#include "sparsgd/collectives/descriptor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/blocks/closed_form.hpp"
#include "collectives/blocks/tags.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"

namespace sparsgd::collectives {
namespace {

// alpha 0.1 ms, 1 GB/s.
CostQuery test_query(int workers, std::size_t n, std::size_t k) {
  CostQuery q;
  q.workers = workers;
  q.n = n;
  q.k = k;
  q.alpha_seconds = 1e-4;
  q.seconds_per_byte = 1e-9;
  return q;
}

// Every tag block, the aggregators' and the other users', lies apart from every other one: a
// message of one collective can never match a receive of another.
TEST(TagAllocator, BlocksAreDisjointAndCoverWhatEachAsks) {
  std::vector<TagBlock> blocks = {tag_block(TagUser::small_collectives), tag_block(TagUser::rank_agreement),
                                  tag_block(TagUser::benchmark_harness)};
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    const TagBlock b = tag_block(*d);
    EXPECT_EQ(b.size, d->tag_count) << d->name;
    blocks.push_back(b);
  }
  std::sort(blocks.begin(), blocks.end(), [](const TagBlock& a, const TagBlock& b) { return a.base < b.base; });
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_LE(blocks[i - 1].base + blocks[i - 1].size, blocks[i].base) << "blocks " << i - 1 << " and " << i << " overlap";
  }
  EXPECT_GE(blocks.front().base, 1);
  EXPECT_LE(blocks.back().base + blocks.back().size, 32767) << "past the tags MPI guarantees";
  const TagBlock gtopk = tag_block(find_aggregator("gtopk"));
  EXPECT_THROW(gtopk[gtopk.size], std::logic_error);
  EXPECT_THROW(gtopk[-1], std::logic_error);
}

// auto's candidates are the aggregators with an auto rank, in rank order, each rank once.
TEST(AggregatorDescriptors, AutoCandidatesComeFromTheirRanks) {
  std::vector<std::pair<int, std::string_view>> ranked;
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d->properties.auto_rank > 0) ranked.emplace_back(d->properties.auto_rank, d->name);
    if (d->properties.delegates || d->properties.needs_shared_indices) {
      EXPECT_EQ(d->properties.auto_rank, 0) << d->name;
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string_view> expected;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    if (i > 0) {
      EXPECT_NE(ranked[i - 1].first, ranked[i].first) << "two candidates share a rank";
    }
    expected.push_back(ranked[i].second);
  }
  EXPECT_EQ(auto_candidates(), expected);
  EXPECT_FALSE(expected.empty());
}

// The compressor registry: unique names, factories that build what they describe (by name and by
// the properties the Compressor interface reports), errors that list every name.
TEST(CompressorDescriptors, NamesAreUniqueAndFactoriesBuildWhatTheyDescribe) {
  std::set<std::string_view> names;
  for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
    EXPECT_TRUE(names.insert(d->name).second) << d->name;
    EXPECT_FALSE(d->summary.empty()) << d->name;
    EXPECT_EQ(&compress::find_compressor(d->name), d);
    ASSERT_NE(d->make, nullptr) << d->name;
    compress::CompressorConfig config;
    config.name = std::string(d->name);
    const auto made = compress::make_compressor(config);
    EXPECT_EQ(made->name(), d->name);
    EXPECT_EQ(made->dense(), d->properties.dense) << d->name;
    EXPECT_EQ(made->scales_values(), d->properties.scales_values) << d->name;
  }
  EXPECT_EQ(names.size(), compress::compressor_names().size());
  EXPECT_EQ(&compress::find_compressor("dense"), &compress::find_compressor("none"));
  try {
    compress::find_compressor("top-k");
    FAIL() << "an unknown name was found";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown compressor 'top-k' (expected " + compress::compressor_choices() + ")"),
              std::string::npos) << e.what();
  }
}

TEST(AggregatorDescriptors, NamesAndWireIdsAreUniqueAndFound) {
  std::set<std::string_view> names;
  std::set<std::uint32_t> ids;
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    EXPECT_TRUE(names.insert(d->name).second) << d->name;
    EXPECT_TRUE(ids.insert(d->wire_id).second) << d->name << " repeats wire id " << d->wire_id;
    EXPECT_NE(d->wire_id, 0u) << d->name;
    EXPECT_FALSE(d->summary.empty()) << d->name;
    EXPECT_EQ(&find_aggregator(d->name), d);
    ASSERT_NE(d->make, nullptr);
    ASSERT_NE(d->reference, nullptr);
    ASSERT_NE(d->cost, nullptr);
    if (d->properties.delegates) {  // its traffic is that of what it chose
      EXPECT_EQ(d->traffic, nullptr) << d->name;
      EXPECT_EQ(d->traffic_of, nullptr) << d->name;
    } else {
      EXPECT_NE(d->traffic == nullptr, d->traffic_of == nullptr) << d->name << ": exactly one traffic closed form";
    }
  }
  EXPECT_EQ(names.size(), aggregator_names().size());
  // "a, b, ... or z", in registry order, dense first.
  std::string choices;
  for (std::size_t i = 0; i < aggregator_descriptors().size(); ++i) {
    choices += (i == 0 ? "" : i + 1 == aggregator_descriptors().size() ? " or " : ", ") +
               std::string(aggregator_descriptors()[i]->name);
  }
  EXPECT_EQ(aggregator_choices(), choices);
  EXPECT_EQ(aggregator_choices().rfind("dense, allgather, gtopk, gtopk-rd, oktopk, randk-shared", 0), 0u);
  try {
    find_aggregator("tree");
    FAIL() << "an unknown name was found";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown aggregator 'tree' (expected dense, allgather"), std::string::npos)
        << e.what();
  }
}

TEST(AggregatorDescriptors, FactoriesBuildWhatTheyDescribe) {
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    const auto aggregator = make_aggregator(std::string(d->name));
    EXPECT_EQ(aggregator->name(), d->name);
    EXPECT_EQ(aggregator->wire_id(), d->wire_id);
    const AggregatorOptions compressed{wire::IndexCoding::compressed};
    if (d->properties.sends_indices) {
      EXPECT_NO_THROW(make_aggregator(std::string(d->name), compressed)) << d->name;
    } else {
      EXPECT_THROW(make_aggregator(std::string(d->name), compressed), InvalidArgument) << d->name;
    }
  }
}

// The cost's bytes for the busiest worker are the largest rank's traffic (the ring's cost rounds
// every chunk up to the largest, at most 4 bytes a message more); one worker sends nothing.
TEST(AggregatorDescriptors, CostAndTrafficAgree) {
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d->traffic == nullptr) continue;  // data-dependent: DataDependentCostMatchesBalancedTraffic
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100}) {
      for (const auto& [n, k] : {std::pair<std::size_t, std::size_t>{1, 1}, {1000, 10}, {1001, 7}, {25'000'000, 25'000}}) {
        CostQuery q = test_query(p, n, k);
        const CommCost cost = d->cost(q);
        std::uint64_t busiest = 0, most_messages = 0, total = 0;
        for (int r = 0; r < p; ++r) {
          const RankTraffic t = d->traffic(p, r, n, k);
          busiest = std::max(busiest, t.bytes);
          most_messages = std::max(most_messages, t.messages);
          total += t.bytes;
        }
        const std::string where = std::string(d->name) + " P=" + std::to_string(p) + " n=" + std::to_string(n) +
                                  " k=" + std::to_string(k);
        if (p == 1) {
          EXPECT_EQ(total, 0u) << where;
          EXPECT_EQ(cost.seconds, 0.0) << where;
          continue;
        }
        EXPECT_GE(cost.bytes_per_worker, static_cast<double>(busiest)) << where;
        EXPECT_LE(cost.bytes_per_worker, static_cast<double>(busiest) + 4.0 * cost.messages) << where;
        if (d->properties.sends_indices) {
          EXPECT_EQ(cost.bytes_per_worker, static_cast<double>(busiest)) << where;
        }
        // messages counts the latencies on the critical path, which a rank's own sends can overlap
        // (gtopk-rd's fold beside the first rounds), but never more than all ranks send, and the
        // data of P ranks needs ceil(log2 P) hops of one-to-one messages to reach every rank.
        EXPECT_GE(cost.messages, 1.0) << where;
        EXPECT_LE(cost.messages, static_cast<double>(most_messages) * p) << where;
        EXPECT_GE(cost.seconds, closed_form::ceil_log2(p) * q.alpha_seconds * 0.999) << where;
        // Each latency on the path is paid, and the busiest rank's bytes leave one after another.
        EXPECT_GE(cost.seconds, cost.messages * q.alpha_seconds + static_cast<double>(busiest) * q.seconds_per_byte * 0.999)
            << where;
        if (d->properties.sends_indices && n >= 1000 * k) {
          q.coding = wire::IndexCoding::compressed;
          EXPECT_LT(d->cost(q).bytes_per_worker, 0.75 * cost.bytes_per_worker) << where;
        }
      }
    }
  }
}

// Where the traffic depends on where the entries lie, the cost describes the balanced case: every
// rank's k entries spread evenly over the index space, with distinct magnitudes. On such data the
// busiest rank's bytes are within 5% of the cost's (the split's parts and the gathered shares
// differ from k/P by a few entries).
TEST(AggregatorDescriptors, DataDependentCostMatchesBalancedTraffic) {
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d->traffic_of == nullptr) continue;
    for (int p : {2, 3, 4, 5, 7, 8, 9, 16, 17}) {
      for (const auto& [n, k] : {std::pair<std::size_t, std::size_t>{100000, 1000}, {400000, 4000}}) {
        std::vector<SparseVector> selections;
        for (int w = 0; w < p; ++w) {
          SparseVector s;
          s.dim = n;
          // Rank w takes every (n/k)-th index from offset w: disjoint and even; random magnitudes.
          Rng rng(static_cast<std::uint64_t>(w) + 1);
          for (std::size_t e = 0; e < k; ++e) {
            s.indices.push_back(static_cast<std::uint32_t>(e * (n / k) + static_cast<std::size_t>(w)));
            s.values.push_back(1.0f + static_cast<float>(rng.next() >> 40) / static_cast<float>(1 << 24));
          }
          selections.push_back(std::move(s));
        }
        CostQuery q = test_query(p, n, k);
        const CommCost cost = d->cost(q);
        std::uint64_t busiest = 0, most_messages = 0;
        for (int r = 0; r < p; ++r) {
          const RankTraffic t = d->traffic_of(selections, k, r);
          busiest = std::max(busiest, t.bytes);
          most_messages = std::max(most_messages, t.messages);
        }
        const std::string where = std::string(d->name) + " P=" + std::to_string(p) + " k=" + std::to_string(k);
        // The cost counts every digit of the radix select; these data may need one fewer (4 KB a
        // message of the count allreduce).
        const double last_digit = 4096.0 * (std::bit_width(static_cast<unsigned>(p)) + 1);
        EXPECT_GE(cost.bytes_per_worker, 0.95 * static_cast<double>(busiest)) << where;
        EXPECT_LE(cost.bytes_per_worker, 1.05 * static_cast<double>(busiest) + last_digit) << where;
        // The cost counts latencies on the critical path: the messages of each of the split's
        // waves overlap theirs (one alpha a wave). A first call also cuts the regions (an
        // allreduce of log2 P + 1 messages at most), which the cost spreads over the 64 calls that
        // reuse them.
        EXPECT_LE(static_cast<double>(most_messages), cost.messages + (p - 2) + std::bit_width(static_cast<unsigned>(p)))
            << where;
        EXPECT_GE(cost.seconds, cost.messages * q.alpha_seconds) << where;
      }
    }
  }
}

TEST(AggregatorDescriptors, OneWorkersReferenceIsItsSelection) {
  const SparseVector selection{10, {1, 4, 7}, {0.5f, -2.0f, 1.0f}};
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d->properties.delegates) {
      EXPECT_THROW(d->reference({selection}, 3), InvalidArgument) << d->name;
      continue;
    }
    const ReferenceAggregation r = d->reference({selection}, 3);
    ASSERT_EQ(r.consumed.size(), 1u) << d->name;
    EXPECT_EQ(r.consumed[0], std::vector<std::uint8_t>(3, 1)) << d->name;
    EXPECT_EQ(r.dense, d->properties.dense_result) << d->name;
    const std::vector<float> average = reference_average(r, 10, 1);
    EXPECT_EQ(average, (std::vector<float>{0, 0.5f, 0, 0, -2.0f, 0, 0, 1.0f, 0, 0})) << d->name;
  }
}

TEST(AggregatorDescriptors, FootprintsGrowWithTheProblem) {
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    EXPECT_GT(d->worker_memory.bytes(1000, 10, 4), 0.0) << d->name;
    EXPECT_GT(d->reference_memory.bytes(1000, 10, 4), 0.0) << d->name;
    EXPECT_GT(d->result_memory.bytes(1000, 10, 4), 0.0) << d->name;
    EXPECT_GT(d->worker_memory.bytes(2000, 20, 4), d->worker_memory.bytes(1000, 10, 4)) << d->name;
  }
}

}  // namespace
}  // namespace sparsgd::collectives
