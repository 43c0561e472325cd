// r-top-k (select/rtopk.hpp): k uniform picks among the exact top r = ceil(r_factor * k).

#include "sparsgd/select/rtopk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "support/reference.hpp"

namespace sparsgd::select {
namespace {

using test::ReferenceTopk;

constexpr double kNaNd = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfd = std::numeric_limits<double>::infinity();

struct RCase {
  std::size_t n;
  std::size_t k;
  double r_factor;
  std::size_t r;
};

void PrintTo(const RCase& c, std::ostream* os) {
  *os << "n = " << c.n << ", k = " << c.k << ", r_factor = " << c.r_factor << ", r = " << c.r;
}

class RtopkR : public ::testing::TestWithParam<RCase> {};

TEST_P(RtopkR, CeilingClampedToN) {
  const RCase c = GetParam();
  EXPECT_EQ(rtopk_r(c.n, c.k, c.r_factor), c.r)
      << "n = " << c.n << ", k = " << c.k << ", r_factor = " << c.r_factor;
}

INSTANTIATE_TEST_SUITE_P(
    Values, RtopkR,
    ::testing::Values(RCase{100, 10, 4.0, 40}, RCase{100, 10, 1.0, 10}, RCase{100, 10, 2.5, 25},
                      RCase{100, 3, 1.5, 5}, RCase{100, 7, 1.25, 9}, RCase{100, 7, 1.125, 8},
                      RCase{100, 25, 4.0, 100}, RCase{100, 26, 4.0, 100}, RCase{100, 30, 4.0, 100},
                      RCase{1, 1, 4.0, 1}, RCase{10, 10, 1.0, 10}, RCase{1000003, 1000, 4.0, 4000},
                      RCase{1000003, 1000, 1.0001220703125, 1001},
                      // huge factors clamp to n instead of overflowing
                      RCase{100, 10, 1e300, 100}, RCase{100, 10, std::numeric_limits<double>::max(), 100},
                      RCase{0, 0, 4.0, 0}));

class RtopkBadFactor : public ::testing::TestWithParam<double> {};

TEST_P(RtopkBadFactor, RTFactorThrows) { EXPECT_THROW(rtopk_r(100, 10, GetParam()), InvalidArgument); }

TEST_P(RtopkBadFactor, RtopkThrows) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 1);
  SparseVector out;
  RtopkWorkspace ws;
  EXPECT_THROW(rtopk(x, 10, GetParam(), 1, out, ws), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Values, RtopkBadFactor,
                         ::testing::Values(0.9999999999999999, 0.5, 0.0, -0.0, -1.0, -4.0, kNaNd, -kNaNd,
                                           kInfd, -kInfd));

// --- Output against the reference ----------------------------------------------------------------

using OutputParam = std::tuple<std::size_t, Distribution>;

class RtopkOutput : public ::testing::TestWithParam<OutputParam> {};

TEST_P(RtopkOutput, KEntriesWithinTheExactTopR) {
  const auto [n, distribution] = GetParam();
  const std::vector<float> x = test::synthetic(n, distribution, 3);
  const ReferenceTopk ref(x);
  RtopkWorkspace ws;
  SparseVector out;
  std::vector<std::size_t> ks = {1, 2, n / 100 + 1, n / 10 + 1, n / 4, n};
  for (const std::size_t k : ks) {
    if (k < 1 || k > n) continue;
    for (const double r_factor : {1.0, 1.5, 4.0, 1e9}) {
      const std::size_t r = rtopk_r(n, k, r_factor);
      ASSERT_EQ(r, std::min<std::size_t>(n, static_cast<std::size_t>(std::ceil(r_factor * k))));
      for (const std::uint64_t seed : {0ULL, 1ULL, 99ULL}) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", k = " + std::to_string(k) +
                     ", r_factor = " + std::to_string(r_factor) + ", seed = " + std::to_string(seed));
        rtopk(x, k, r_factor, seed, out, ws);
        ASSERT_EQ(out.size(), k);
        ASSERT_TRUE(test::valid_selection(out, x));
        for (const std::uint32_t i : out.indices) {
          ASSERT_LT(ref.rank(i), r) << "index " << i << " (|x| = " << std::fabs(x[i])
                                    << ") is not among the top " << r;
        }
        if (r == k) {
          ASSERT_TRUE(test::same_sparse(out, ref.topk(k))) << "r == k is plain top-k";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Data, RtopkOutput,
                         ::testing::Combine(::testing::Values(1, 7, 1000, 40000, 100003),
                                            ::testing::ValuesIn(test::all_distributions())),
                         [](const ::testing::TestParamInfo<OutputParam>& param_info) {
                           return "n" + std::to_string(std::get<0>(param_info.param)) + "_" +
                                  to_string(std::get<1>(param_info.param));
                         });

TEST(RtopkOutput, ResizesOutput) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 3);
  SparseVector out;
  out.resize(777);
  RtopkWorkspace ws;
  rtopk(x, 10, 4.0, 1, out, ws);
  EXPECT_EQ(out.indices.size(), 10u);
  EXPECT_EQ(out.values.size(), 10u);
  EXPECT_EQ(out.dim, 1000u);
}

TEST(RtopkOutput, EmptyInput) {
  SparseVector out;
  out.resize(3);
  RtopkWorkspace ws;
  EXPECT_NO_THROW(rtopk(std::span<const float>(), 0, 4.0, 1, out, ws));
  EXPECT_TRUE(out.empty());
}

// --- Randomness -----------------------------------------------------------------------------------

TEST(RtopkRandomness, SameSeedSameResult) {
  const std::vector<float> x = test::synthetic(100003, Distribution::normal, 8);
  RtopkWorkspace reused;
  SparseVector a, b;
  for (const std::uint64_t seed : {0ULL, 5ULL, 0xABCDULL}) {
    RtopkWorkspace fresh;
    rtopk(x, 100, 4.0, seed, a, fresh);
    rtopk(x, 3000, 2.0, seed + 1, b, reused);  // dirty the reused workspace with another shape
    rtopk(x, 100, 4.0, seed, b, reused);
    EXPECT_TRUE(test::same_sparse(a, b)) << "seed " << seed;
  }
}

TEST(RtopkRandomness, DifferentSeedsDiffer) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 8);
  RtopkWorkspace ws;
  SparseVector out;
  std::set<std::vector<std::uint32_t>> seen;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    rtopk(x, 10, 4.0, seed, out, ws);
    seen.insert(out.indices);
  }
  // C(40, 10) = 8.5e8 subsets: 50 draws do not repeat.
  EXPECT_EQ(seen.size(), 50u);
}

struct FrequencyCase {
  const char* name;
  std::vector<float> x;
  std::size_t k;
  double r_factor;
  std::vector<std::uint32_t> top_r;  // the exact top-r set, ascending
};

std::vector<FrequencyCase> frequency_cases() {
  std::vector<FrequencyCase> cases;
  {
    // Distinct magnitudes 1..200 in shuffled positions with random signs.
    const std::size_t n = 200;
    std::vector<float> x(n);
    std::vector<std::uint32_t> perm(n);
    for (std::size_t i = 0; i < n; ++i) perm[i] = static_cast<std::uint32_t>(i);
    Rng rng(4);
    for (std::size_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    std::vector<std::uint32_t> top;
    for (std::size_t i = 0; i < n; ++i) {
      const float magnitude = static_cast<float>(perm[i] + 1);
      x[i] = (rng.next() & 1) ? magnitude : -magnitude;
      if (perm[i] + 1 > n - 20) top.push_back(static_cast<std::uint32_t>(i));
    }
    cases.push_back({"distinct", x, 5, 4.0, top});
  }
  {
    // Ten large distinct values and ties at +-1 everywhere else: r = 12 takes the ten and the two
    // lowest-index ties (0 and 1).
    const std::size_t n = 100;
    std::vector<float> x(n);
    Rng rng(5);
    for (float& v : x) v = (rng.next() & 1) ? 1.0f : -1.0f;
    std::vector<std::uint32_t> top = {0, 1};
    for (std::uint32_t j = 0; j < 10; ++j) {
      const std::uint32_t pos = 5 + 9 * j;
      x[pos] = static_cast<float>(10 + j) * ((j & 1) ? -1.0f : 1.0f);
      top.push_back(pos);
    }
    std::sort(top.begin(), top.end());
    cases.push_back({"ties_at_r", x, 3, 4.0, top});
  }
  return cases;
}

TEST(RtopkRandomness, EachOfTopRAboutKOverROfTheTime) {
  for (const FrequencyCase& c : frequency_cases()) {
    SCOPED_TRACE(c.name);
    const std::size_t n = c.x.size();
    const std::size_t r = rtopk_r(n, c.k, c.r_factor);
    ASSERT_EQ(r, c.top_r.size());
    std::vector<std::size_t> counts(n, 0);
    RtopkWorkspace ws;
    SparseVector out;
    const std::size_t draws = 20000;
    for (std::size_t seed = 0; seed < draws; ++seed) {
      rtopk(c.x, c.k, c.r_factor, seed, out, ws);
      ASSERT_EQ(out.size(), c.k);
      for (const std::uint32_t i : out.indices) ++counts[i];
    }
    std::vector<std::size_t> top_counts;
    for (std::size_t i = 0; i < n; ++i) {
      const bool in_top = std::binary_search(c.top_r.begin(), c.top_r.end(), static_cast<std::uint32_t>(i));
      if (in_top) {
        top_counts.push_back(counts[i]);
      } else {
        EXPECT_EQ(counts[i], 0u) << "index " << i << " is outside the top r";
      }
    }
    const double stat = test::sampling_chi_square(top_counts, draws, c.k);
    EXPECT_LT(stat, test::chi_square_bound(static_cast<double>(r - 1)));
    const double p = static_cast<double>(c.k) / static_cast<double>(r);
    const double sd = std::sqrt(draws * p * (1.0 - p));
    for (const std::size_t count : top_counts) EXPECT_NEAR(static_cast<double>(count), draws * p, 6.0 * sd);
  }
}

// --- Bad input ------------------------------------------------------------------------------------

TEST(RtopkBadInput, BadK) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 1);
  SparseVector out;
  RtopkWorkspace ws;
  EXPECT_THROW(rtopk(x, 1001, 4.0, 1, out, ws), InvalidArgument);
  EXPECT_THROW(rtopk(x, 0, 4.0, 1, out, ws), InvalidArgument);
  EXPECT_THROW(rtopk(std::span<const float>(), 1, 4.0, 1, out, ws), InvalidArgument);
}

TEST(RtopkBadInput, NonFiniteThrowsInvalidData) {
  RtopkWorkspace ws;
  SparseVector out;
  for (const std::size_t n : {1, 7, 1000, 100003}) {
    const std::vector<float> clean = test::synthetic(n, Distribution::normal, 2);
    for (const std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()}) {
        std::vector<float> x = clean;
        x[pos] = bad;
        for (const std::size_t k : {std::size_t{1}, n / 10 + 1, n}) {
          for (const double r_factor : {1.0, 4.0}) {
            EXPECT_THROW(rtopk(x, k, r_factor, 1, out, ws), InvalidData)
                << bad << " at " << pos << " of " << n << ", k = " << k << ", r_factor = " << r_factor;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace sparsgd::select
