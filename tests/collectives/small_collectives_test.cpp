#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "collectives/blocks/tags.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/sim/cost_model.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::collectives {
namespace {

class Bookkeeping : public ::testing::TestWithParam<int> {};

TEST_P(Bookkeeping, BroadcastFromEveryRootAndAllreduceSum) {
  const int p = GetParam();
  for (int root = 0; root < p; root += std::max(1, p / 3)) {
    transport::run_local_workers(p, [&](transport::Transport& t) {
      std::vector<float> values = {static_cast<float>(t.rank()), 1.5f * static_cast<float>(t.rank())};
      broadcast(t, values, root);
      EXPECT_EQ(values[0], static_cast<float>(root));
      EXPECT_EQ(values[1], 1.5f * static_cast<float>(root));
      std::vector<double> sums = {1.0, static_cast<double>(t.rank())};
      allreduce_sum(t, sums);
      EXPECT_EQ(sums[0], static_cast<double>(p));
      EXPECT_EQ(sums[1], static_cast<double>(p * (p - 1) / 2));
    });
  }
}

// Every subset of flagged ranks for small P, a few for larger P: the answer is the lowest flagged
// rank (or -1) on every rank.
TEST_P(Bookkeeping, LowestFlaggedRankAgreesEverywhere) {
  const int p = GetParam();
  std::vector<unsigned> subsets;
  if (p <= 5) {
    for (unsigned s = 0; s < (1u << p); ++s) subsets.push_back(s);
  } else {
    subsets = {0u, 1u, 1u << (p - 1), (1u << (p - 1)) | (1u << 3), (1u << p) - 1, 0b10100u};
  }
  for (const unsigned subset : subsets) {
    int expected = -1;
    for (int r = 0; r < p; ++r) {
      if (subset & (1u << r)) {
        expected = r;
        break;
      }
    }
    transport::run_local_workers(p, [&](transport::Transport& t) {
      EXPECT_EQ(lowest_flagged_rank(t, (subset >> t.rank()) & 1u), expected) << "subset " << subset;
    });
  }
}

// Element-wise maxima reach every rank, whichever rank holds them.
TEST_P(Bookkeeping, AllreduceMaxGivesEveryRankTheMaxima) {
  const int p = GetParam();
  transport::run_local_workers(p, [&](transport::Transport& t) {
    const double r = t.rank();
    std::vector<double> values = {1.5 * r, 0.25 * (p - r), 7.0, r == p / 2 ? 1e9 : 0.0};
    const transport::TrafficCounters before = t.counters();
    allreduce_max(t, values);
    const RankTraffic want = allreduce_max_traffic(p, t.rank(), values.size());
    EXPECT_EQ(t.counters().messages_sent - before.messages_sent, want.messages) << "rank " << t.rank();
    EXPECT_EQ(t.counters().bytes_sent - before.bytes_sent, want.bytes) << "rank " << t.rank();
    EXPECT_EQ(values, (std::vector<double>{1.5 * (p - 1), 0.25 * p, 7.0, 1e9}));
    std::vector<double> none;
    allreduce_max(t, none);
  });
}

INSTANTIATE_TEST_SUITE_P(WorkerCounts, Bookkeeping, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 13, 16, 17));

TEST(Bookkeeping, LengthMismatchIsAnError) {
  EXPECT_THROW(transport::run_local_workers(3,
                                            [](transport::Transport& t) {
                                              std::vector<float> values(t.rank() == 2 ? 4 : 3, 1.0f);
                                              broadcast(t, values, 0);
                                            }),
               transport::TransportError);
}

// A time must be finite and >= 0 on the rank that gives it; a rank that receives a malformed one
// (here: a peer that sends NaN by hand) or another length throws.
TEST(Bookkeeping, AllreduceMaxRefusesWhatIsNotATime) {
  transport::run_local_workers(1, [](transport::Transport& t) {
    std::vector<double> negative = {-1.0};
    EXPECT_THROW(allreduce_max(t, negative), InvalidArgument);
    std::vector<double> nan = {std::nan("")};
    EXPECT_THROW(allreduce_max(t, nan), InvalidArgument);
  });
  EXPECT_THROW(transport::run_local_workers(3,
                                            [](transport::Transport& t) {
                                              std::vector<double> values(t.rank() == 1 ? 2 : 1, 1.0);
                                              allreduce_max(t, values);
                                            }),
               transport::TransportError);
  std::string error;
  transport::run_local_workers(2, [&](transport::Transport& t) {
    if (t.rank() == 1) {
      const double nan = std::nan("");
      t.send(0, tag_block(TagUser::small_collectives)[tag_offsets::kMaxReduce], std::as_bytes(std::span<const double>(&nan, 1)));
      return;
    }
    std::vector<double> values = {1.0};
    try {
      allreduce_max(t, values);
    } catch (const transport::TransportError& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("rank 1 sent nan where a time"), std::string::npos) << error;
}

// The closed-form model against hand-computed values (alpha 1 ms, 1 us per byte).
TEST(CostModel, MatchesHandComputation) {
  const transport::NetworkSpec net = transport::parse_network("alpha=0.001,bw=8e6");
  const std::size_t k = 100;  // a sparse message: 20 + 8 * 100 = 820 bytes; with a 100-bit mask 833
  // gtopk-rd at P = 8: 3 rounds of (1 ms + 820 us).
  EXPECT_NEAR(sim::aggregation_cost("gtopk-rd", 8, 10000, k, net).seconds, 3 * (0.001 + 820e-6), 1e-12);
  // P = 6: ranks 4 and 5 fold into 0 and 1 while 2 and 3 run their first round; rank 0 has all
  // after 2 hops (its second partner, rank 2, had no fold to wait for) and the time to send its own
  // second message (820 us), then its unfold (833 B) takes a hop: one alpha less than fold + 2
  // rounds + unfold. Rank 2's last message arrives after 3 hops, earlier.
  EXPECT_NEAR(sim::aggregation_cost("gtopk-rd", 6, 10000, k, net).seconds,
              2 * (0.001 + 820e-6) + 820e-6 + (0.001 + 833e-6), 1e-12);
  // P = 7: rank 2 is folded too, so rank 0's second partner is a hop late: fold + 2 rounds + unfold.
  EXPECT_NEAR(sim::aggregation_cost("gtopk-rd", 7, 10000, k, net).seconds,
              3 * (0.001 + 820e-6) + (0.001 + 833e-6), 1e-12);
  // gtopk tree at P = 8: 3 rounds up (820 B) and 3 down (833 B).
  EXPECT_NEAR(sim::aggregation_cost("gtopk", 8, 10000, k, net).seconds, 3 * (0.001 + 820e-6) + 3 * (0.001 + 833e-6),
              1e-12);
  // Bruck allgather at P = 5: 3 rounds of latency, 4 blocks of 820 B.
  EXPECT_NEAR(sim::aggregation_cost("allgather", 5, 10000, k, net).seconds, 3 * 0.001 + 4 * 820e-6, 1e-12);
  // Ring allreduce of n = 10000 floats at P = 4: 6 steps of 20 + 4 * 2500 bytes.
  EXPECT_NEAR(sim::aggregation_cost("dense", 4, 10000, k, net).seconds, 6 * (0.001 + 10020e-6), 1e-12);
  EXPECT_EQ(sim::aggregation_cost("gtopk", 1, 10000, k, net).seconds, 0.0);
  EXPECT_THROW(sim::aggregation_cost("tree", 4, 10000, k, net), InvalidArgument);
}

// Compressed indices: k = 100 of n = 10000 are packed as one short block whose expected width is
// that of the largest of 100 geometric gaps (p = 0.01): sum over w of 1 - (1 - 0.99^(2^w))^100 =
// 9.445 bits, 1 + ceil(944.5 / 8) = 120 bytes and a 2-byte prefix; the message 20 + 4 + 400 + 122 =
// 546 bytes.
TEST(CostModel, CompressedIndicesChargeTheCodesExpectedSize) {
  const transport::NetworkSpec net = transport::parse_network("alpha=0.001,bw=8e6");
  const std::size_t k = 100;
  constexpr auto kCoded = wire::IndexCoding::compressed;
  EXPECT_NEAR(sim::aggregation_cost("gtopk-rd", 8, 10000, k, net, kCoded).seconds, 3 * (0.001 + 546e-6), 1e-12);
  EXPECT_NEAR(sim::aggregation_cost("allgather", 5, 10000, k, net, kCoded).seconds, 3 * 0.001 + 4 * 546e-6, 1e-12);
  // The broadcast's 100-bit mask adds 13 bytes.
  EXPECT_NEAR(sim::aggregation_cost("gtopk", 8, 10000, k, net, kCoded).seconds,
              3 * (0.001 + 546e-6) + 3 * (0.001 + 559e-6), 1e-12);
  EXPECT_THROW(sim::aggregation_cost("dense", 4, 10000, k, net, kCoded), InvalidArgument);
  EXPECT_THROW(sim::aggregation_cost("randk-shared", 4, 10000, k, net, kCoded), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::collectives

namespace sparsgd::collectives {
namespace {

TEST(DisagreeingRanks, CheckRanksAgreePassesWhenEqualAndNamesTheFieldAndRanksOtherwise) {
  for (const int p : {1, 2, 3, 5, 8}) {
    transport::run_local_workers(p, [](transport::Transport& t) {
      check_ranks_agree(t, {{"density", "0.01"}, {"compressor", "topk"}}, "the options");
    });
  }
  for (const int p : {3, 5}) {
    std::vector<std::string> errors(static_cast<std::size_t>(p));
    transport::run_local_workers(p, [&](transport::Transport& t) {
      const std::string density = t.rank() >= 2 ? "0.001" : "0.01";
      try {
        check_ranks_agree(t, {{"compressor", "topk"}, {"density", density}, {"seed", std::to_string(t.rank())}},
                          "the options");
      } catch (const InvalidArgument& e) {
        errors[static_cast<std::size_t>(t.rank())] = e.what();
      }
    });
    const std::string want = p == 3 ? "ranks disagree on the options: 'density': 0.01 on rank 0, 0.001 on rank 2"
                                    : "ranks disagree on the options: 'density': 0.01 on rank 0, 0.001 on ranks 2, 3, 4";
    for (const auto& e : errors) EXPECT_EQ(e, want);  // every rank fails, with the same message
  }
  std::vector<std::string> errors(2);
  transport::run_local_workers(2, [&](transport::Transport& t) {
    ConfigFields fields = {{"a", "1"}};
    if (t.rank() == 1) fields.push_back({"b", "2"});
    try {
      check_ranks_agree(t, fields, "x");
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(t.rank())] = e.what();
    }
  });
  EXPECT_EQ(errors[0], "ranks disagree on x: 'b': (missing) on rank 0, 2 on rank 1");
  EXPECT_EQ(errors[1], errors[0]);
}

// A rank running another build of the library (a node left on an older install) is named at
// start-up. Rank 1 plays that build by sending the configuration message itself: first one that
// names another build, then one from a build before the field existed.
TEST(DisagreeingRanks, ARankOfAnotherBuildIsNamed) {
  const std::string mine = build_identity();
  for (const bool older : {false, true}) {
    std::string got;
    transport::run_local_workers(2, [&](transport::Transport& t) {
      if (t.rank() == 0) {
        try {
          check_ranks_agree(t, {{"a", "1"}}, "x");
        } catch (const InvalidArgument& e) {
          got = e.what();
        }
        return;
      }
      using namespace std::string_literals;
      const std::string other = older ? "a\0" "1\0"s : "sparsgd build\0" "0.0.9 (0123456789ab)\0" "a\0" "1\0"s;
      t.send(0, tag_block(TagUser::rank_agreement)[tag_offsets::kAgreementGather], std::as_bytes(std::span(other.data(), other.size())));
      std::vector<std::byte> verdict;
      t.recv(0, tag_block(TagUser::rank_agreement)[tag_offsets::kAgreementVerdict], verdict, 1 << 20);
    });
    EXPECT_EQ(got, older ? "ranks disagree on x: 'sparsgd build': " + mine + " on rank 0, (a field named 'a') on rank 1"
                         : "ranks disagree on x: 'sparsgd build': " + mine + " on rank 0, 0.0.9 (0123456789ab) on rank 1");
  }
}

TEST(DisagreeingRanks, BroadcastTextGivesEveryRankRankZerosText) {
  for (const int p : {1, 2, 3, 5, 8}) {
    for (const std::string& text : {std::string(), std::string("runs/train-20261201-224500"),
                                    std::string("a\0b\n'quoted'", 12), std::string(5000, 'x')}) {
      std::vector<std::string> got(static_cast<std::size_t>(p));
      transport::run_local_workers(p, [&](transport::Transport& t) {
        got[static_cast<std::size_t>(t.rank())] = broadcast_text(t, t.rank() == 0 ? text : "other " + std::to_string(t.rank()));
      });
      for (const auto& g : got) EXPECT_EQ(g, text) << "P=" << p;
    }
  }
}

}  // namespace
}  // namespace sparsgd::collectives
