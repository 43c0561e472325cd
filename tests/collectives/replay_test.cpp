// The serial replay the conformance tests and `bench comm` check against must itself catch what
// it exists to catch: a wrong sum, a sum of the wrong kind, mass that went missing.

#include <gtest/gtest.h>

#include "sparsgd/collectives/replay.hpp"
#include "sparsgd/collectives/selection_replay.hpp"
#include "sparsgd/core/synthetic.hpp"

namespace sparsgd::collectives {
namespace {

// The reference's own sum, as an aggregator would report it.
Aggregation as_aggregation(const ReferenceAggregation& reference) {
  Aggregation a;
  a.dense = reference.dense;
  a.sum = reference.sum;
  a.dense_sum = reference.dense_sum;
  return a;
}

TEST(ExchangeReplay, CatchesWrongSumsAndLostMass) {
  for (const char* aggregator : {"gtopk-rd", "allgather", "dense"}) {
    ExchangeConfig config;
    config.aggregator = aggregator;
    config.density = 0.05;
    config.compressor.name = std::string(aggregator) == "dense" ? "none" : "topk";
    ExchangeReplay replay(config, 2000, 3);
    replay.step(0, [](int w, std::span<float> out) { fill_gradient(out, 4, w, 0); });
    const Aggregation right = as_aggregation(replay.reference());
    EXPECT_EQ(replay.sum_difference(right), "") << aggregator;
    EXPECT_LT(replay.conservation_error(right), 1e-6) << aggregator;
    Aggregation wrong = right;
    if (wrong.dense) {
      wrong.dense_sum[7] += 0.5f;
    } else {
      wrong.sum.values[3] += 0.5f;
    }
    EXPECT_NE(replay.sum_difference(wrong), "") << aggregator;
    EXPECT_GT(replay.conservation_error(wrong), 1e-4) << aggregator;
    Aggregation other_kind = right;
    other_kind.dense = !right.dense;
    EXPECT_NE(replay.sum_difference(other_kind), "") << aggregator;
  }
}

TEST(SelectionReplay, CatchesWrongSumsLostMassAndAnUndeclaredDelegate) {
  for (const char* aggregator : {"gtopk-rd", "allgather", "oktopk", "dense"}) {
    std::vector<SparseVector> selections(5);
    for (int w = 0; w < 5; ++w) draw_selection(selections[static_cast<std::size_t>(w)], 3001, 40, 8, w, 2);
    SelectionReplay replay(aggregator);
    replay.step(selections, 40);
    const Aggregation right = as_aggregation(replay.reference());
    EXPECT_EQ(replay.sum_difference(right), "") << aggregator;
    EXPECT_LT(replay.conservation_error(right), 1e-6) << aggregator;
    Aggregation wrong = right;
    if (wrong.dense) {
      wrong.dense_sum[selections[1].indices[0]] += 0.5f;
    } else {
      wrong.sum.values[3] += 0.5f;
    }
    EXPECT_NE(replay.sum_difference(wrong), "") << aggregator;
    EXPECT_GT(replay.conservation_error(wrong), 1e-4) << aggregator;
    // An entry dropped from the sum: mass lost.
    Aggregation dropped = right;
    if (dropped.dense) {
      dropped.dense_sum[selections[2].indices[5]] = 0.0f;
    } else {
      dropped.sum.indices.erase(dropped.sum.indices.begin() + 2);
      dropped.sum.values.erase(dropped.sum.values.begin() + 2);
    }
    EXPECT_NE(replay.sum_difference(dropped), "") << aggregator;
    EXPECT_GT(replay.conservation_error(dropped), 1e-4) << aggregator;
  }
  SelectionReplay delegating("auto");
  std::vector<SparseVector> one(1);
  draw_selection(one[0], 100, 5, 1, 0, 0);
  EXPECT_THROW(delegating.step(one, 5), InvalidArgument);
  EXPECT_NO_THROW(delegating.step(one, 5, "gtopk-rd"));
  EXPECT_THROW(SelectionReplay("nonesuch"), InvalidArgument);
}

TEST(ExchangeReplay, RefusesWhatTheExchangeRefuses) {
  ExchangeConfig config;
  config.compressor.name = "randk-unbiased";  // needs error feedback off
  EXPECT_THROW(ExchangeReplay(config, 100, 2), InvalidArgument);
  config.error_feedback = false;
  EXPECT_THROW(ExchangeReplay(config, 100, 0), InvalidArgument);
  EXPECT_THROW(ExchangeReplay(config, 100, -1), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::collectives
