#include <gtest/gtest.h>

#include "sparsgd/core/error.hpp"
#include "sparsgd/sim/cost_model.hpp"
#include "sparsgd/sim/scaling.hpp"

#include "sparsgd/collectives/descriptor.hpp"

namespace sparsgd::sim {
namespace {

TEST(Scaling, EfficiencyIsComputeOverIterationTime) {
  const auto net = transport::parse_network("alpha=0.001,bw=8e6");  // 1 ms + 1 us per byte
  // n = 10000, density 0.01: k = 100; gtopk-rd at P = 4: 2 rounds of 1 ms + 820 us = 3.64 ms.
  const auto rows = scaling_table(10000, 10.0, 2.0, 0.01, {1, 4}, net);
  ASSERT_EQ(rows.size(), 2 * collectives::modelled_aggregators().size());  // every modelled aggregator x 2 worker counts
  ASSERT_GE(rows.size(), 10u);  // dense, allgather, gtopk, gtopk-rd, oktopk at least
  for (const auto& r : rows) {
    EXPECT_NEAR(r.iteration_ms, r.compute_ms + r.compress_ms + r.comm_ms, 1e-12);
    EXPECT_NEAR(r.efficiency, 10.0 / r.iteration_ms, 1e-12);
    if (r.workers == 1) {
      EXPECT_EQ(r.comm_ms, 0.0);
      EXPECT_EQ(r.efficiency, 1.0);  // one worker: no exchange, no compression
    }
    if (r.method == "dense") {
      EXPECT_EQ(r.compress_ms, 0.0);
    }
    if (r.method == "gtopk-rd" && r.workers == 4) {
      EXPECT_NEAR(r.comm_ms, 2 * (1.0 + 0.820), 1e-9);
      EXPECT_NEAR(r.efficiency, 10.0 / (10.0 + 2.0 + 3.64), 1e-9);
    }
  }
}

// Compressed indices: the sparse methods charged 546-byte messages (bookkeeping_test.cpp works
// that out), dense unchanged.
TEST(Scaling, CompressedIndicesShrinkTheSparseMethodsOnly) {
  const auto net = transport::parse_network("alpha=0.001,bw=8e6");
  const auto raw = scaling_table(10000, 10.0, 2.0, 0.01, {4}, net);
  const auto coded = scaling_table(10000, 10.0, 2.0, 0.01, {4}, net, wire::IndexCoding::compressed);
  ASSERT_EQ(raw.size(), coded.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i].method == "dense") {
      EXPECT_EQ(coded[i].comm_ms, raw[i].comm_ms);
    } else {
      EXPECT_LT(coded[i].comm_ms, raw[i].comm_ms) << raw[i].method;
    }
    if (raw[i].method == "gtopk-rd") {
      EXPECT_NEAR(coded[i].comm_ms, 2 * (1.0 + 0.546), 1e-9);
    }
  }
}

TEST(Scaling, PresetsAndErrors) {
  EXPECT_DOUBLE_EQ(find_preset("resnet50").parameters, 25.6e6);
  EXPECT_DOUBLE_EQ(*find_preset("resnet50").compute_ms, 4882.0);
  EXPECT_FALSE(find_preset("lstm-ptb").compute_ms.has_value());
  EXPECT_THROW(find_preset("gpt"), InvalidArgument);
  const auto net = transport::parse_network("paper-1gbe");
  EXPECT_THROW(scaling_table(0, 10, 1, 0.001, {4}, net), InvalidArgument);
  EXPECT_THROW(scaling_table(1e6, 0, 1, 0.001, {4}, net), InvalidArgument);
  EXPECT_THROW(scaling_table(1e6, 10, 1, 0.0, {4}, net), InvalidArgument);
  EXPECT_THROW(scaling_table(1e6, 10, 1, 0.001, {0}, net), InvalidArgument);
  EXPECT_THROW(scaling_table(1e6, 10, 1, 0.001, {4}, transport::parse_network("none")), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::sim
