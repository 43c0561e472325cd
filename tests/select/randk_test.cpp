// random_k_indices (select/randk.hpp): k distinct uniform indices, ascending, from a seed.

#include "sparsgd/select/randk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "support/reference.hpp"

namespace sparsgd::select {
namespace {

std::vector<std::uint32_t> draw(std::size_t n, std::size_t k, std::uint64_t seed,
                                std::vector<std::uint64_t>& scratch) {
  std::vector<std::uint32_t> out(k);
  random_k_indices(n, k, seed, out, scratch);
  return out;
}

std::vector<std::uint32_t> draw(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::vector<std::uint64_t> scratch;
  return draw(n, k, seed, scratch);
}

::testing::AssertionResult ascending_in_range(const std::vector<std::uint32_t>& idx, std::size_t n) {
  for (std::size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] >= n) return ::testing::AssertionFailure() << "index " << idx[j] << " >= n = " << n;
    if (j > 0 && idx[j] <= idx[j - 1]) {
      return ::testing::AssertionFailure() << "entry " << j << ": " << idx[j] << " after " << idx[j - 1];
    }
  }
  return ::testing::AssertionSuccess();
}

using Shape = std::tuple<std::size_t, std::size_t>;  // n, k

class RandkShape : public ::testing::TestWithParam<Shape> {};

TEST_P(RandkShape, KDistinctAscendingInRange) {
  const auto [n, k] = GetParam();
  std::vector<std::uint64_t> scratch;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    // Output longer than k: only [0, k) is written.
    std::vector<std::uint32_t> out(k + 3, 0xABCDEF01u);
    random_k_indices(n, k, seed, out, scratch);
    for (std::size_t j = k; j < out.size(); ++j) ASSERT_EQ(out[j], 0xABCDEF01u) << "wrote past k";
    out.resize(k);
    ASSERT_TRUE(ascending_in_range(out, n)) << "seed " << seed;
  }
}

TEST_P(RandkShape, SameSeedSameResultWhateverTheScratch) {
  const auto [n, k] = GetParam();
  for (std::uint64_t seed : {0ULL, 1ULL, 0xFEEDFACEULL}) {
    const std::vector<std::uint32_t> fresh = draw(n, k, seed);
    // A scratch dirtied by a different shape must not change the result.
    std::vector<std::uint64_t> dirty;
    draw(2 * n + 77, std::min<std::size_t>(k, 3) + 1, seed + 1, dirty);
    std::fill(dirty.begin(), dirty.end(), ~std::uint64_t{0});
    EXPECT_EQ(draw(n, k, seed, dirty), fresh) << "seed " << seed;
    EXPECT_EQ(draw(n, k, seed, dirty), fresh) << "seed " << seed << ", repeated";
  }
}

TEST_P(RandkShape, DifferentSeedsDiffer) {
  const auto [n, k] = GetParam();
  if (k == n || k == 0) GTEST_SKIP() << "only one subset exists";
  // At least n >= 2 subsets exist: 20 seeds give at least 2 distinct results except with
  // probability below 2^-19.
  std::set<std::vector<std::uint32_t>> seen;
  for (std::uint64_t seed = 0; seed < 20; ++seed) seen.insert(draw(n, k, seed));
  EXPECT_GE(seen.size(), 2u);
  // C(n, k) >= C(100, 5) = 7.5e7: 20 draws repeat with probability below 3e-6.
  if (n >= 100 && std::min(k, n - k) >= 5) {
    EXPECT_EQ(seen.size(), 20u);
  }
}

TEST_P(RandkShape, MeanIndexIsCentral) {
  // Every index equally likely means a mean index of (n - 1) / 2 with standard error
  // sqrt((n^2 - 1) / 12 / (k draws)) (slightly less: without replacement).
  const auto [n, k] = GetParam();
  if (k == n) GTEST_SKIP();
  const std::size_t draws = std::max<std::size_t>(1, 20000 / k);
  double sum = 0.0;
  std::vector<std::uint64_t> scratch;
  for (std::size_t d = 0; d < draws; ++d) {
    for (const std::uint32_t i : draw(n, k, 1000 + d, scratch)) sum += i;
  }
  const double samples = static_cast<double>(draws * k);
  const double nn = static_cast<double>(n);
  const double stderr_mean = std::sqrt((nn * nn - 1.0) / 12.0 / samples);
  EXPECT_NEAR(sum / samples, (nn - 1.0) / 2.0, 6.0 * stderr_mean + 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RandkShape,
                         ::testing::Values(
                             // sparse: k << n
                             Shape{1, 1}, Shape{10, 1}, Shape{1000, 1}, Shape{1000, 10}, Shape{1000, 62},
                             Shape{1000003, 1}, Shape{1000003, 1000}, Shape{1000003, 50000},
                             // around and above n / 16, dense
                             Shape{1000, 63}, Shape{1000, 64}, Shape{1000, 500}, Shape{1000, 999},
                             Shape{1000, 1000}, Shape{100000, 6250}, Shape{100000, 6251},
                             Shape{100000, 99999}, Shape{1000003, 62501}, Shape{1000003, 1000002},
                             // tiny
                             Shape{2, 1}, Shape{2, 2}, Shape{7, 3}, Shape{17, 16}, Shape{64, 2},
                             Shape{65, 5}),
                         [](const ::testing::TestParamInfo<Shape>& param_info) {
                           return "n" + std::to_string(std::get<0>(param_info.param)) + "_k" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

TEST(Randk, KEqualsNGivesEveryIndex) {
  for (const std::size_t n : {1, 2, 17, 1000, 100003}) {
    const std::vector<std::uint32_t> out = draw(n, n, 99);
    ASSERT_EQ(out.size(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], i) << "n = " << n;
  }
}

TEST(Randk, EmptyIsFine) {
  std::vector<std::uint64_t> scratch;
  std::vector<std::uint32_t> out;
  EXPECT_NO_THROW(random_k_indices(0, 0, 1, out, scratch));
}

TEST(Randk, SeedsAreNotJustShifted) {
  // Neighbouring seeds must not give shifted copies of each other (a generator seeded with
  // seed + c that walks a fixed sequence would).
  const std::vector<std::uint32_t> a = draw(1000, 50, 5);
  const std::vector<std::uint32_t> b = draw(1000, 50, 6);
  std::vector<std::uint32_t> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  // Expected overlap 50 * 50 / 1000 = 2.5.
  EXPECT_LT(common.size(), 15u);
}

// --- Frequencies ---------------------------------------------------------------------------------

struct FrequencyCase {
  std::size_t n;
  std::size_t k;
  std::size_t draws;
};

void PrintTo(const FrequencyCase& c, std::ostream* os) {
  *os << "n = " << c.n << ", k = " << c.k << ", draws = " << c.draws;
}

class RandkFrequency : public ::testing::TestWithParam<FrequencyCase> {};

TEST_P(RandkFrequency, EachIndexAboutKOverNOfTheTime) {
  const FrequencyCase c = GetParam();
  std::vector<std::size_t> counts(c.n, 0);
  std::vector<std::uint64_t> scratch;
  std::vector<std::uint32_t> out(c.k);
  for (std::size_t d = 0; d < c.draws; ++d) {
    // Consecutive raw seeds: they must behave like independent streams.
    random_k_indices(c.n, c.k, d, out, scratch);
    for (const std::uint32_t i : out) ++counts[i];
  }
  const double stat = test::sampling_chi_square(counts, c.draws, c.k);
  EXPECT_LT(stat, test::chi_square_bound(static_cast<double>(c.n - 1))) << "n = " << c.n << ", k = " << c.k;
  // And no index is far off on its own (6 standard deviations).
  const double p = static_cast<double>(c.k) / static_cast<double>(c.n);
  const double expected = static_cast<double>(c.draws) * p;
  const double sd = std::sqrt(static_cast<double>(c.draws) * p * (1.0 - p));
  for (std::size_t i = 0; i < c.n; ++i) {
    EXPECT_NEAR(static_cast<double>(counts[i]), expected, 6.0 * sd) << "index " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RandkFrequency,
                         ::testing::Values(FrequencyCase{50, 5, 20000}, FrequencyCase{40, 20, 20000},
                                           FrequencyCase{64, 2, 20000}, FrequencyCase{1000, 10, 20000},
                                           FrequencyCase{1000, 200, 2000}, FrequencyCase{33, 32, 20000}),
                         [](const ::testing::TestParamInfo<FrequencyCase>& param_info) {
                           return "n" + std::to_string(param_info.param.n) + "_k" +
                                  std::to_string(param_info.param.k);
                         });

class RandkSubsets : public ::testing::TestWithParam<FrequencyCase> {};

TEST_P(RandkSubsets, EveryKSubsetEquallyLikely) {
  // The header promises more than marginal uniformity: every k-subset is equally likely.
  const FrequencyCase c = GetParam();
  std::map<std::vector<std::uint32_t>, std::size_t> counts;
  std::vector<std::uint64_t> scratch;
  for (std::size_t d = 0; d < c.draws; ++d) ++counts[draw(c.n, c.k, 777000 + d, scratch)];
  // C(n, k) subsets.
  double subsets = 1.0;
  for (std::size_t j = 0; j < c.k; ++j) {
    subsets = subsets * static_cast<double>(c.n - j) / static_cast<double>(j + 1);
  }
  const auto cells = static_cast<std::size_t>(std::llround(subsets));
  EXPECT_EQ(counts.size(), cells) << "some subsets never drawn";
  std::vector<std::size_t> flat;
  for (const auto& [subset, count] : counts) flat.push_back(count);
  flat.resize(cells, 0);
  const double expected = static_cast<double>(c.draws) / subsets;
  const double stat = test::chi_square(flat, expected, expected);
  EXPECT_LT(stat, test::chi_square_bound(subsets - 1.0));
}

INSTANTIATE_TEST_SUITE_P(Cases, RandkSubsets,
                         ::testing::Values(FrequencyCase{5, 2, 20000}, FrequencyCase{6, 3, 20000},
                                           FrequencyCase{40, 2, 100000}),
                         [](const ::testing::TestParamInfo<FrequencyCase>& param_info) {
                           return "n" + std::to_string(param_info.param.n) + "_k" +
                                  std::to_string(param_info.param.k);
                         });

// --- Bad input ------------------------------------------------------------------------------------

TEST(RandkBadInput, Throws) {
  std::vector<std::uint64_t> scratch;
  std::vector<std::uint32_t> out(100);
  EXPECT_THROW(random_k_indices(10, 11, 1, out, scratch), InvalidArgument);
  EXPECT_THROW(random_k_indices(0, 1, 1, out, scratch), InvalidArgument);
  EXPECT_THROW(random_k_indices(10, 0, 1, out, scratch), InvalidArgument);
  std::vector<std::uint32_t> short_out(4);
  EXPECT_THROW(random_k_indices(10, 5, 1, short_out, scratch), InvalidArgument);
  EXPECT_THROW(random_k_indices(100000, 5, 1, short_out, scratch), InvalidArgument);
  EXPECT_THROW(random_k_indices(100000, 50000, 1, short_out, scratch), InvalidArgument);
  EXPECT_NO_THROW(random_k_indices(10, 4, 1, short_out, scratch));
}

}  // namespace
}  // namespace sparsgd::select
