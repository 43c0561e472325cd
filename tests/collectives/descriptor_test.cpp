// The aggregator descriptors (collectives/descriptor.hpp): one registry with unique names and wire
// ids, factories that build what they describe, properties that the factory enforces, and two
// closed forms (cost on the critical path, traffic per rank) that agree with each other. That
// the traffic matches what a run sends is checked by the conformance suite.

#include "sparsgd/collectives/descriptor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {
namespace {

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
    ASSERT_NE(d->traffic, nullptr);
  }
  EXPECT_EQ(names.size(), aggregator_names().size());
  EXPECT_EQ(aggregator_choices(), "dense, allgather, gtopk, gtopk-rd or randk-shared");
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
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100}) {
      for (const auto& [n, k] : {std::pair<std::size_t, std::size_t>{1, 1}, {1000, 10}, {1001, 7}, {25'000'000, 25'000}}) {
        CostQuery q;
        q.workers = p;
        q.n = n;
        q.k = k;
        q.alpha_seconds = 1e-4;
        q.seconds_per_byte = 1e-9;
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
        EXPECT_GE(cost.messages, static_cast<double>(most_messages)) << where;
        // Every message pays alpha and its bytes pay beta at least once on the critical path.
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

TEST(AggregatorDescriptors, OneWorkersReferenceIsItsSelection) {
  const SparseVector selection{10, {1, 4, 7}, {0.5f, -2.0f, 1.0f}};
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
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
