// Compressors (compress/compressor.hpp): the factory, each compressor's output contract, the seeds
// of the random ones, and bad input.

#include "sparsgd/compress/compressor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/select/threshold.hpp"
#include "support/reference.hpp"

namespace sparsgd::compress {
namespace {

using test::ReferenceTopk;

constexpr double kRFactor = 4.0;

std::unique_ptr<Compressor> make(const std::string& name, std::uint64_t seed = 17, bool shared_seed = false) {
  CompressorConfig config;
  config.name = name;
  config.r_factor = kRFactor;
  config.seed = seed;
  config.shared_seed = shared_seed;
  return make_compressor(config);
}

TEST(CompressorNames, ExactlyTheDocumentedSet) {
  const std::vector<std::string>& names = compressor_names();
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "duplicate names";
  EXPECT_EQ(unique, (std::set<std::string>{"topk", "topk-reuse", "randk", "randk-unbiased", "rtopk", "gaussiank", "dgc", "none"}));
}

TEST(MakeCompressor, EveryNameBuildsThatCompressor) {
  for (const std::string& name : compressor_names()) {
    const auto c = make(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->name(), name);
    EXPECT_EQ(c->dense(), name == "none") << name;
    EXPECT_FALSE(c->shared_indices()) << name;
  }
  EXPECT_TRUE(make("randk", 1, true)->shared_indices());
  EXPECT_FALSE(make("randk", 1, false)->shared_indices());
}

TEST(MakeCompressor, DefaultConfigIsTopk) {
  const auto c = make_compressor(CompressorConfig{});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), "topk");
}

TEST(MakeCompressor, UnknownNameThrows) {
  for (const std::string name :
       {"", "TopK", "top-k", "topk ", " topk", "rand-k", "gtopk", "random", "NONE"}) {
    CompressorConfig config;
    config.name = name;
    EXPECT_THROW(make_compressor(config), InvalidArgument) << "'" << name << "'";
  }
}

TEST(MakeCompressor, BadRFactorThrows) {
  for (const double r :
       {0.5, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CompressorConfig config;
    config.name = "rtopk";
    config.r_factor = r;
    EXPECT_THROW(make_compressor(config), InvalidArgument) << r;
  }
  CompressorConfig ok;
  ok.name = "rtopk";
  ok.r_factor = 1.0;
  EXPECT_NO_THROW(make_compressor(ok));
}

// --- Output contract -----------------------------------------------------------------------------

class CompressorOutput : public ::testing::TestWithParam<std::string> {};

TEST_P(CompressorOutput, MeetsTheContract) {
  const std::string name = GetParam();
  const auto compressor = make(name);
  SparseVector out;
  std::uint64_t iteration = 0;
  for (const std::size_t n : {1, 2, 7, 1000, 100003}) {
    for (const Distribution distribution : test::all_distributions()) {
      const std::vector<float> acc = test::synthetic(n, distribution, n + 3);
      const ReferenceTopk ref(acc);
      for (const std::size_t k : {std::size_t{1}, n / 100 + 1, n / 3 + 1, n}) {
        if (k > n) continue;
        SCOPED_TRACE(name + ", n = " + std::to_string(n) + ", " + to_string(distribution) +
                     ", k = " + std::to_string(k));
        // Junk from a previous call must not leak.
        out.dim = 12345;
        out.resize(n + 10);
        compressor->compress(acc, k, CompressContext{.iteration = iteration++, .rank = 1}, out);
        const double scale = compressor->value_scale(n, k);
        ASSERT_EQ(scale, name == "randk-unbiased" ? static_cast<double>(n) / static_cast<double>(k) : 1.0);
        ASSERT_EQ(compressor->scales_values(), name == "randk-unbiased");
        if (scale != 1.0) {
          // Sent values are acc's entries times the scale; the rest of the contract on acc's entries.
          for (std::size_t e = 0; e < out.size() && out.indices[e] < n; ++e) {
            ASSERT_EQ(out.values[e], static_cast<float>(scale) * acc[out.indices[e]]) << "entry " << e;
            out.values[e] = acc[out.indices[e]];
          }
        }
        ASSERT_TRUE(test::valid_selection(out, acc));
        if (name == "none") {
          ASSERT_EQ(out.size(), n);
        } else if (name == "gaussiank" || name == "dgc" || name == "topk-reuse") {
          ASSERT_GE(out.size(), select::threshold_min_count(k));
          ASSERT_LE(out.size(), select::threshold_max_count(k));
          ASSERT_TRUE(test::selection_by_magnitude(out, acc));
        } else {
          ASSERT_EQ(out.size(), k);
        }
        if (name == "topk") {
          ASSERT_TRUE(test::same_sparse(out, ref.topk(k)));
        }
        if (name == "rtopk") {
          const std::size_t r = std::min<std::size_t>(n, static_cast<std::size_t>(std::ceil(kRFactor * k)));
          for (const std::uint32_t i : out.indices) ASSERT_LT(ref.rank(i), r) << "index " << i;
        }
      }
    }
  }
}

TEST_P(CompressorOutput, BadKThrowsInvalidArgument) {
  const auto compressor = make(GetParam());
  const std::vector<float> acc = test::synthetic(1000, Distribution::normal, 1);
  SparseVector out;
  EXPECT_THROW(compressor->compress(acc, 0, {}, out), InvalidArgument);
  EXPECT_THROW(compressor->compress(acc, 1001, {}, out), InvalidArgument);
  EXPECT_THROW(compressor->compress(std::span<const float>(), 1, {}, out), InvalidArgument);
}

TEST_P(CompressorOutput, NonFiniteThrowsInvalidData) {
  const std::string name = GetParam();
  const auto compressor = make(name);
  SparseVector out;
  for (const std::size_t n : {1, 7, 1000, 100003}) {
    const std::vector<float> clean = test::synthetic(n, Distribution::normal, 9);
    for (const std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()}) {
        std::vector<float> acc = clean;
        acc[pos] = bad;
        for (const std::size_t k : {std::size_t{1}, n / 10 + 1, n}) {
          EXPECT_THROW(compressor->compress(acc, k, {}, out), InvalidData)
              << name << ": " << bad << " at " << pos << " of " << n << ", k = " << k;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Names, CompressorOutput, ::testing::ValuesIn(compressor_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// randk-unbiased draws randk's indices and sends acc's entries times n/k, so that the sent vector
// (dense, zeros elsewhere) averages to acc over the draws: checked over 20,000 draws at n = 100,
// k = 10, where each mean's standard error is sqrt((n/k - 1) / draws) |acc_i| = 0.021 |acc_i|.
TEST(RandkUnbiased, SameIndicesAsRandkAndUnbiased) {
  const std::size_t n = 100, k = 10;
  const int draws = 20000;
  const std::vector<float> acc = test::synthetic(n, Distribution::normal, 4);
  const auto unbiased = make("randk-unbiased", 3), plain = make("randk", 3);
  std::vector<double> mean(n, 0.0);
  SparseVector a, b;
  for (int d = 0; d < draws; ++d) {
    const CompressContext context{.iteration = static_cast<std::uint64_t>(d), .rank = 2};
    unbiased->compress(acc, k, context, a);
    plain->compress(acc, k, context, b);
    ASSERT_EQ(a.indices, b.indices) << "draw " << d;
    for (std::size_t e = 0; e < k; ++e) mean[a.indices[e]] += a.values[e] / static_cast<double>(draws);
  }
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(mean[i], acc[i], 5 * 0.021 * std::fabs(acc[i]) + 1e-6) << "entry " << i;
  }
}

// --- Seeds ---------------------------------------------------------------------------------------

std::vector<std::uint32_t> indices_of(Compressor& c, std::span<const float> acc, std::size_t k,
                                      std::uint64_t iteration, int rank) {
  SparseVector out;
  c.compress(acc, k, CompressContext{.iteration = iteration, .rank = rank}, out);
  return out.indices;
}

TEST(RandkSeeds, SharedSeedSameIndicesOnEveryRank) {
  const std::size_t n = 10000, k = 100;
  const auto c = make("randk", 5, true);
  for (std::uint64_t iteration : {0ULL, 1ULL, 2ULL, 1000ULL}) {
    const std::vector<float> acc0 = test::synthetic(n, Distribution::normal, 0);
    const std::vector<std::uint32_t> first = indices_of(*c, acc0, k, iteration, 0);
    for (int rank = 1; rank < 8; ++rank) {
      // Every rank has different data; the indices depend only on (seed, iteration).
      const std::vector<float> acc =
          test::synthetic(n, Distribution::normal, static_cast<std::uint64_t>(rank));
      EXPECT_EQ(indices_of(*c, acc, k, iteration, rank), first)
          << "iteration " << iteration << ", rank " << rank;
    }
    // Another instance with the same config agrees (nothing hidden in the object's state).
    const auto other = make("randk", 5, true);
    EXPECT_EQ(indices_of(*other, acc0, k, iteration, 3), first);
  }
}

TEST(RandkSeeds, SharedSeedDiffersAcrossIterationsAndSeeds) {
  const std::size_t n = 10000, k = 100;
  const std::vector<float> acc = test::synthetic(n, Distribution::normal, 0);
  const auto c = make("randk", 5, true);
  std::set<std::vector<std::uint32_t>> seen;
  for (std::uint64_t iteration = 0; iteration < 20; ++iteration)
    seen.insert(indices_of(*c, acc, k, iteration, 0));
  EXPECT_EQ(seen.size(), 20u);
  const auto other_seed = make("randk", 6, true);
  EXPECT_NE(indices_of(*other_seed, acc, k, 0, 0), indices_of(*c, acc, k, 0, 0));
  // (seed 5, iteration 1) and (seed 6, iteration 0) are different streams.
  EXPECT_NE(indices_of(*other_seed, acc, k, 0, 0), indices_of(*c, acc, k, 1, 0));
}

TEST(RandkSeeds, WithoutSharedSeedRanksDiffer) {
  const std::size_t n = 10000, k = 100;
  const std::vector<float> acc = test::synthetic(n, Distribution::normal, 0);
  const auto c = make("randk", 5, false);
  std::set<std::vector<std::uint32_t>> seen;
  for (int rank = 0; rank < 8; ++rank) seen.insert(indices_of(*c, acc, k, 3, rank));
  EXPECT_EQ(seen.size(), 8u);
  // Deterministic for a given (seed, iteration, rank), across instances.
  const auto other = make("randk", 5, false);
  EXPECT_EQ(indices_of(*other, acc, k, 3, 2), indices_of(*c, acc, k, 3, 2));
  // Iteration and rank are separate streams: (iteration 1, rank 2) is not (iteration 2, rank 1).
  EXPECT_NE(indices_of(*c, acc, k, 1, 2), indices_of(*c, acc, k, 2, 1));
  EXPECT_NE(indices_of(*c, acc, k, 4, 0), indices_of(*c, acc, k, 3, 0));
}

TEST(RandkSeeds, IndicesCoverTheRangeOverIterations) {
  // Over many iterations every index is picked about k / n of the time.
  const std::size_t n = 200, k = 10, iterations = 10000;
  const std::vector<float> acc = test::synthetic(n, Distribution::normal, 0);
  const auto c = make("randk", 8, true);
  std::vector<std::size_t> counts(n, 0);
  SparseVector out;
  for (std::uint64_t it = 0; it < iterations; ++it) {
    c->compress(acc, k, CompressContext{.iteration = it, .rank = 0}, out);
    for (const std::uint32_t i : out.indices) ++counts[i];
  }
  EXPECT_LT(test::sampling_chi_square(counts, iterations, k),
            test::chi_square_bound(static_cast<double>(n - 1)));
}

TEST(RtopkSeeds, DeterministicPerContextAndVariesAcrossIterations) {
  const std::size_t n = 10000, k = 50;
  const std::vector<float> acc = test::synthetic(n, Distribution::normal, 0);
  const auto c = make("rtopk", 5);
  const auto other = make("rtopk", 5);
  EXPECT_EQ(indices_of(*c, acc, k, 7, 1), indices_of(*other, acc, k, 7, 1));
  std::set<std::vector<std::uint32_t>> seen;
  for (std::uint64_t iteration = 0; iteration < 10; ++iteration)
    seen.insert(indices_of(*c, acc, k, iteration, 0));
  EXPECT_EQ(seen.size(), 10u);
}

TEST(DeterministicCompressors, IgnoreTheContext) {
  const std::vector<float> acc = test::synthetic(10000, Distribution::normal, 0);
  for (const std::string name : {"topk", "gaussiank", "dgc", "none"}) {
    const auto c = make(name);
    EXPECT_EQ(indices_of(*c, acc, 100, 0, 0), indices_of(*c, acc, 100, 9, 3)) << name;
  }
}

// Ok-Topk's local selection: exact in the iterations of the period, one filter pass against the
// kept k-th magnitude between, exact again whenever that pass misses the count guarantee.
TEST(ReusedThreshold, FiltersByTheKeptThresholdBetweenRecomputations) {
  CompressorConfig config;
  config.name = "topk-reuse";
  config.threshold_period = 32;
  const auto c = make_compressor(config);
  const std::size_t n = 20000, k = 200;
  const std::vector<float> acc0 = test::synthetic(n, Distribution::normal, 4);
  SparseVector out;
  c->compress(acc0, k, {.iteration = 0, .rank = 0}, out);
  ASSERT_TRUE(test::same_sparse(out, ReferenceTopk(acc0).topk(k)));
  float kth = std::numeric_limits<float>::infinity();
  for (const float v : out.values) kth = std::min(kth, std::fabs(v));

  // A slightly different accumulator: exactly its entries with |x| >= the kept k-th magnitude.
  auto filtered = [&](const std::vector<float>& acc) {
    SparseVector want;
    want.dim = acc.size();
    for (std::size_t i = 0; i < acc.size(); ++i) {
      if (std::fabs(acc[i]) >= kth) {
        want.indices.push_back(static_cast<std::uint32_t>(i));
        want.values.push_back(acc[i]);
      }
    }
    return want;
  };
  std::vector<float> acc1 = test::synthetic(n, Distribution::normal, 5);
  for (std::size_t i = 0; i < n; ++i) acc1[i] = acc0[i] + 0.1f * acc1[i];
  const SparseVector want1 = filtered(acc1);
  ASSERT_GE(want1.size(), select::threshold_min_count(k));
  ASSERT_LE(want1.size(), select::threshold_max_count(k));
  ASSERT_NE(want1.size(), k);  // the filter, not a top-k, made the selection
  c->compress(acc1, k, {.iteration = 1, .rank = 0}, out);
  EXPECT_TRUE(test::same_sparse(out, want1));

  // The scale tripled: the kept threshold passes far more than 1.25 k, so the exact top-k runs.
  std::vector<float> acc2 = acc1;
  for (float& v : acc2) v *= 3.0f;
  c->compress(acc2, k, {.iteration = 2, .rank = 0}, out);
  EXPECT_TRUE(test::same_sparse(out, ReferenceTopk(acc2).topk(k)));

  // Non-finite input found by the filter pass too.
  std::vector<float> bad = acc2;
  bad[n / 2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(c->compress(bad, k, {.iteration = 3, .rank = 0}, out), InvalidData);

  // Iteration 32 recomputes even where the kept threshold would still do (as it does in 31).
  std::vector<float> acc32 = test::synthetic(n, Distribution::normal, 6);
  for (std::size_t i = 0; i < n; ++i) acc32[i] = acc2[i] + 0.3f * acc32[i];
  c->compress(acc32, k, {.iteration = 31, .rank = 0}, out);
  EXPECT_NE(out.size(), k);
  EXPECT_GE(out.size(), select::threshold_min_count(k));
  c->compress(acc32, k, {.iteration = 32, .rank = 0}, out);
  EXPECT_TRUE(test::same_sparse(out, ReferenceTopk(acc32).topk(k)));

  config.threshold_period = 0;
  EXPECT_THROW(make_compressor(config), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::compress
