// Misconfigured or misbehaving peers: every rank ends with a clear error, never a hang.

#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <string>
#include <vector>

#include "collectives/blocks/tags.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/core/wire.hpp"
#include "sparsgd/select/topk.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::collectives {
namespace {

constexpr std::chrono::milliseconds kShortTimeout{1500};

SparseVector selection(std::size_t n, std::size_t k, int rank) {
  std::vector<float> g(n);
  fill_gradient(g, 3, rank, 0);
  SparseVector s;
  select::TopkWorkspace ws;
  select::topk(g, k, s, ws);
  return s;
}

// Runs `aggregator_of(rank)` with per-rank n and k on P workers and returns the error text.
template <typename Config>
std::string failure_of(int p, Config config) {
  const auto start = std::chrono::steady_clock::now();
  try {
    transport::run_local_workers(
        p,
        [&](transport::Transport& t) {
          const auto [name, n, k] = config(t.rank());
          auto aggregator = make_aggregator(name);
          Aggregation out;
          aggregator->aggregate(t, selection(n, k, t.rank()), k, out);
        },
        kShortTimeout);
  } catch (const Error& e) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    return e.what();
  }
  return "";
}

class DisagreeingRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(DisagreeingRanks, DifferentNFails) {
  const std::string name = GetParam();
  const std::string error = failure_of(4, [&](int r) {
    return std::make_tuple(name, std::size_t{r == 2 ? 1001u : 1000u}, std::size_t{10});
  });
  ASSERT_FALSE(error.empty());
  // The header check names n; randk-shared may first see that the ranks' indices differ; a rank
  // that waits on a failed peer reports the timeout or the abort.
  EXPECT_TRUE(error.find("n = ") != std::string::npos || error.find("timed out") != std::string::npos ||
              error.find("dense chunk") != std::string::npos ||
              error.find("did not select the same entries") != std::string::npos)
      << error;
}

TEST_P(DisagreeingRanks, DifferentKFails) {
  const std::string name = GetParam();
  if (name == "randk-shared") GTEST_SKIP() << "covered by the index checksum test";
  const std::string error = failure_of(4, [&](int r) {
    return std::make_tuple(name, std::size_t{1000}, std::size_t{r == 1 ? 12u : 10u});
  });
  ASSERT_FALSE(error.empty());
}

TEST_P(DisagreeingRanks, DifferentAlgorithmFails) {
  const std::string name = GetParam();
  const std::string other = name == "gtopk" ? "gtopk-rd" : "gtopk";
  const std::string error = failure_of(4, [&](int r) {
    return std::make_tuple(r == 3 ? other : name, std::size_t{1000}, std::size_t{10});
  });
  ASSERT_FALSE(error.empty());
}

INSTANTIATE_TEST_SUITE_P(EveryAggregator, DisagreeingRanks,
                         ::testing::ValuesIn(aggregator_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

TEST(AggregatorErrors, RandkSharedRejectsDifferentIndices) {
  const std::string error = failure_of(3, [](int) { return std::make_tuple(std::string("randk-shared"), std::size_t{500}, std::size_t{20}); });
  // selection() takes each rank's own top-k, which differ between ranks.
  EXPECT_NE(error.find("did not select the same entries"), std::string::npos) << error;
}

TEST(AggregatorErrors, MalformedMessageFromAPeerIsNamed) {
  // Rank 1 impersonates a gtopk child but sends an index beyond n (the first tag of gtopk's block is
  // its reduce tag).
  try {
    transport::run_local_workers(
        2,
        [](transport::Transport& t) {
          if (t.rank() == 1) {
            std::vector<std::byte> bad;
            const std::vector<std::uint32_t> idx = {3, 5000};
            const std::vector<float> val = {1.0f, 2.0f};
            wire::encode_sparse(3, 1000, 10, idx, val, {}, bad);
            t.send(0, tag_block(find_aggregator("gtopk"))[0], bad);
            return;
          }
          Aggregation out;
          make_aggregator("gtopk")->aggregate(t, selection(1000, 10, 0), 10, out);
        },
        kShortTimeout);
    FAIL() << "expected a wire error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("message from rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

// One rank with compressed indices, the others raw: the first message names the disagreement.
TEST(AggregatorErrors, RanksThatDisagreeOnIndexCodingFailClearly) {
  for (const char* name : {"allgather", "gtopk", "gtopk-rd"}) {
    try {
      transport::run_local_workers(
          3,
          [&](transport::Transport& t) {
            const auto coding = t.rank() == 1 ? wire::IndexCoding::compressed : wire::IndexCoding::raw;
            Aggregation out;
            make_aggregator(name, {coding})->aggregate(t, selection(1000, 10, t.rank()), 10, out);
          },
          kShortTimeout);
      ADD_FAILURE() << name << ": expected a wire error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("all ranks must use the same index coding"), std::string::npos)
          << name << ": " << e.what();
    }
  }
  EXPECT_THROW(make_aggregator("dense", {wire::IndexCoding::compressed}), InvalidArgument);
  EXPECT_THROW(make_aggregator("randk-shared", {wire::IndexCoding::compressed}), InvalidArgument);
}

TEST(AggregatorErrors, SilentPeerTimesOutNamingIt) {
  try {
    transport::run_local_workers(
        4,
        [](transport::Transport& t) {
          if (t.rank() == 3) return;  // never takes part
          Aggregation out;
          make_aggregator("gtopk-rd")->aggregate(t, selection(1000, 10, t.rank()), 10, out);
        },
        std::chrono::milliseconds(300));
    FAIL() << "expected a timeout";
  } catch (const transport::TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("from rank"), std::string::npos) << e.what();
  }
}

TEST(AggregatorErrors, RejectsBadLocalSelections) {
  transport::run_local_workers(1, [](transport::Transport& t) {
    for (const std::string& name : aggregator_names()) {
      auto aggregator = make_aggregator(name);
      Aggregation out;
      SparseVector unsorted{100, {5, 3}, {1.0f, 2.0f}};
      EXPECT_THROW(aggregator->aggregate(t, unsorted, 2, out), InvalidArgument) << name;
      SparseVector out_of_range{100, {5, 100}, {1.0f, 2.0f}};
      EXPECT_THROW(aggregator->aggregate(t, out_of_range, 2, out), InvalidArgument) << name;
      SparseVector not_finite{100, {5, 7}, {1.0f, std::numeric_limits<float>::quiet_NaN()}};
      EXPECT_THROW(aggregator->aggregate(t, not_finite, 2, out), InvalidArgument) << name;
      SparseVector ok{100, {5}, {1.0f}};
      EXPECT_THROW(aggregator->aggregate(t, ok, 101, out), InvalidArgument) << name;  // k > n
    }
  });
  EXPECT_THROW(make_aggregator("tree"), InvalidArgument);
}

}  // namespace
// The exchange's options are refused as a whole, naming what is wrong, before anything is built.
TEST(ExchangeConfigErrors, ImpossibleCombinationsAreNamed) {
  const auto message_of = [](const ExchangeConfig& config) -> std::string {
    try {
      validate(config);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  ExchangeConfig ok;
  EXPECT_EQ(message_of(ok), "");
  ExchangeConfig shared = ok;
  shared.aggregator = "randk-shared";
  EXPECT_NE(message_of(shared).find("needs the randk or randk-unbiased compressor"), std::string::npos);
  shared.compressor.name = "randk-unbiased";
  EXPECT_NE(message_of(shared).find("switch error feedback off"), std::string::npos);
  shared.error_feedback = false;
  EXPECT_EQ(message_of(shared), "");
  // The dense compressor's n entries fit a sparse aggregator only at density 1.
  ExchangeConfig dense = ok;
  dense.compressor.name = "none";
  dense.aggregator = "allgather";
  EXPECT_NE(message_of(dense).find("sends all n entries: use the dense aggregator, or density 1"), std::string::npos);
  dense.density = 1.0;
  EXPECT_EQ(message_of(dense), "");
  dense.density = 0.01;
  dense.aggregator = "dense";
  EXPECT_EQ(message_of(dense), "");
  ExchangeConfig unknown = ok;
  unknown.compressor.name = "top-k";
  EXPECT_NE(message_of(unknown).find("unknown compressor"), std::string::npos);
  ExchangeConfig density = ok;
  density.density = 0.0;
  EXPECT_NE(message_of(density), "");
  ExchangeConfig coded = ok;
  coded.index_coding = wire::IndexCoding::compressed;
  EXPECT_EQ(message_of(coded), "");
  coded.aggregator = "dense";
  EXPECT_NE(message_of(coded).find("sends no indices, so they cannot be compressed"), std::string::npos);
  EXPECT_THROW(wire::parse_index_coding("rice"), InvalidArgument);
  // The exchange itself refuses what validate refuses.
  transport::LocalTransport one(std::make_shared<transport::LocalContext>(1), 0);
  shared.error_feedback = true;
  EXPECT_THROW(GradientExchange(one, 100, shared), InvalidArgument);
}

}  // namespace sparsgd::collectives
