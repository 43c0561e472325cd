// Threshold selection (select/threshold.hpp): the count guarantee, the selection property, the
// Gaussian tail and its inverse.

#include "sparsgd/select/threshold.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "support/reference.hpp"

namespace sparsgd::select {
namespace {

using test::ReferenceTopk;

const char* name_of(ThresholdEstimator e) {
  return e == ThresholdEstimator::gaussian ? "gaussian" : "sampled";
}

constexpr ThresholdEstimator kEstimators[] = {ThresholdEstimator::gaussian, ThresholdEstimator::sampled};

// --- Count bounds ---------------------------------------------------------------------------------

TEST(ThresholdCounts, HandValues) {
  // ceil(0.8 k) and max(that, floor(1.25 k)).
  const std::size_t table[][3] = {
      {1, 1, 1},   {2, 2, 2},    {3, 3, 3},      {4, 4, 5},         {5, 4, 6},         {7, 6, 8},
      {10, 8, 12}, {25, 20, 31}, {100, 80, 125}, {1000, 800, 1250}, {1001, 801, 1251}, {25000, 20000, 31250}};
  for (const auto& row : table) {
    EXPECT_EQ(threshold_min_count(row[0]), row[1]) << "k = " << row[0];
    EXPECT_EQ(threshold_max_count(row[0]), row[2]) << "k = " << row[0];
  }
}

TEST(ThresholdCounts, ExactIntegerFormulaForEveryK) {
  // In integers: ceil(4k / 5) and floor(5k / 4). A floating 0.8 * k that lands a hair above an
  // integer would make ceil one too large.
  for (std::size_t k = 1; k <= 200000; ++k) {
    const std::size_t lo = (4 * k + 4) / 5;
    const std::size_t hi = std::max(lo, 5 * k / 4);
    ASSERT_EQ(threshold_min_count(k), lo) << "k = " << k;
    ASSERT_EQ(threshold_max_count(k), hi) << "k = " << k;
    ASSERT_LE(threshold_min_count(k), k);
    ASSERT_GE(threshold_max_count(k), k);
  }
  for (const std::size_t k : {std::size_t{1} << 31, std::size_t{4294967295u}}) {
    EXPECT_EQ(threshold_min_count(k), (4 * k + 4) / 5) << k;
    EXPECT_EQ(threshold_max_count(k), 5 * k / 4) << k;
  }
}

// --- Selection on data ----------------------------------------------------------------------------

// Builds the exact reference only if a fallback needs it.
class LazyReference {
 public:
  explicit LazyReference(const std::vector<float>& x) : x_(x) {}
  const ReferenceTopk& get() {
    if (!ref_) ref_ = std::make_unique<ReferenceTopk>(x_);
    return *ref_;
  }

 private:
  const std::vector<float>& x_;
  std::unique_ptr<ReferenceTopk> ref_;
};

void check_result(const std::vector<float>& x, std::size_t k, const ThresholdResult& result,
                  const SparseVector& out, LazyReference& ref) {
  const std::size_t n = x.size();
  ASSERT_EQ(result.count, out.size());
  ASSERT_GE(out.size(), threshold_min_count(k)) << "count below the guarantee";
  ASSERT_LE(out.size(), threshold_max_count(k)) << "count above the guarantee";
  ASSERT_TRUE(test::valid_selection(out, x));
  ASSERT_TRUE(test::selection_by_magnitude(out, x));
  if (result.exact_fallback) {
    ASSERT_TRUE(test::same_sparse(out, ref.get().topk(k))) << "the fallback is the exact top-k";
    return;
  }
  if (result.passes == 0) return;  // no filter pass: nothing more the threshold field can say
  // A threshold selection: selected magnitudes exceed the threshold, the others do not.
  std::vector<char> selected(n, 0);
  for (const std::uint32_t i : out.indices) selected[i] = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const float m = std::fabs(x[i]);
    if (selected[i]) {
      ASSERT_GT(m, result.threshold) << "selected index " << i;
    } else {
      ASSERT_LE(m, result.threshold) << "unselected index " << i;
    }
  }
}

std::vector<std::size_t> ks_for(std::size_t n) {
  std::vector<std::size_t> ks;
  for (const std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5},
                              std::size_t{7}, std::size_t{10}, n / 1000, n / 100, n / 10, n / 2, n - 1, n}) {
    if (k >= 1 && k <= n && std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  return ks;
}

using SyntheticParam = std::tuple<std::size_t, Distribution, std::uint64_t>;

class ThresholdSynthetic : public ::testing::TestWithParam<SyntheticParam> {};

TEST_P(ThresholdSynthetic, CountWithinBoundsAndSelectionByMagnitude) {
  const auto [n, distribution, seed] = GetParam();
  const std::vector<float> x = test::synthetic(n, distribution, seed);
  LazyReference ref(x);
  ThresholdWorkspace ws;
  SparseVector out;
  for (const std::size_t k : ks_for(n)) {
    for (const ThresholdEstimator estimator : kEstimators) {
      SCOPED_TRACE(std::string(name_of(estimator)) + ", k = " + std::to_string(k));
      const ThresholdResult result = threshold_select(x, k, estimator, out, ws);
      check_result(x, k, result, out, ref);
    }
  }
}

std::string synthetic_name(const ::testing::TestParamInfo<SyntheticParam>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param)) + "_seed" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Small, ThresholdSynthetic,
                         ::testing::Combine(::testing::Values(1, 2, 7, 100, 1000, 40000),
                                            ::testing::ValuesIn(test::all_distributions()),
                                            ::testing::Values(1, 2)),
                         synthetic_name);
INSTANTIATE_TEST_SUITE_P(Large, ThresholdSynthetic,
                         ::testing::Combine(::testing::Values(1000003),
                                            ::testing::ValuesIn(test::all_distributions()),
                                            ::testing::Values(3)),
                         synthetic_name);

struct Adversarial {
  const char* name;
  std::vector<float> x;
};

std::vector<Adversarial> adversarial_inputs() {
  std::vector<Adversarial> all;
  const std::size_t n = 100003;
  Rng rng(12);
  {
    // Zeros and 101 entries of exactly +-1: no threshold gives 50 entries.
    std::vector<float> x(n);
    for (float& v : x) v = (rng.next() & 1) ? 0.0f : -0.0f;
    for (std::size_t i = 7; i < n; i += 1000) x[i] = (rng.next() & 1) ? 1.0f : -1.0f;
    all.push_back({"spikes_tied", x});
  }
  {
    // A few magnitude levels.
    std::vector<float> x = test::synthetic(n, Distribution::normal, 4);
    for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
    all.push_back({"quantized", x});
  }
  {
    // Normal noise plus a handful of huge values: mean and std are dominated by the outliers.
    std::vector<float> x = test::synthetic(n, Distribution::normal, 5);
    for (int j = 0; j < 5; ++j) x[rng.below(n)] = (j & 1) ? 1e30f : -1e30f;
    all.push_back({"huge_outliers", x});
  }
  {
    // Everything tiny (denormal) with a nonzero mean: the variance underflows in float.
    std::vector<float> x(n);
    for (float& v : x) v = std::bit_cast<float>(static_cast<std::uint32_t>(rng.below(0x007FFFFFu) + 1));
    all.push_back({"denormals", x});
  }
  {
    // Large common offset: mean 1000, tiny spread.
    std::vector<float> x = test::synthetic(n, Distribution::normal, 6);
    for (float& v : x) v = 1000.0f + 0.01f * v;
    all.push_back({"offset", x});
  }
  {
    // Sorted magnitudes: a strided sample is fine, a prefix sample would not be.
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 1e-3f;
    all.push_back({"ascending", x});
  }
  return all;
}

TEST(ThresholdAdversarial, CountWithinBoundsAndSelectionByMagnitude) {
  ThresholdWorkspace ws;
  SparseVector out;
  for (const Adversarial& a : adversarial_inputs()) {
    LazyReference ref(a.x);
    for (const std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{50}, std::size_t{100},
                                std::size_t{101}, std::size_t{102}, std::size_t{1000}, std::size_t{30000}}) {
      for (const ThresholdEstimator estimator : kEstimators) {
        SCOPED_TRACE(std::string(a.name) + ", " + name_of(estimator) + ", k = " + std::to_string(k));
        const ThresholdResult result = threshold_select(a.x, k, estimator, out, ws);
        check_result(a.x, k, result, out, ref);
      }
    }
  }
}

TEST(ThresholdEstimate, WorksOnNormalData) {
  // On N(0, 1) the estimate lands near k without falling back, within the correction budget.
  const std::vector<float> x = test::synthetic(1000000, Distribution::normal, 77);
  LazyReference ref(x);
  ThresholdWorkspace ws;
  SparseVector out;
  for (const ThresholdEstimator estimator : kEstimators) {
    for (const std::size_t k : {1000, 10000}) {
      SCOPED_TRACE(std::string(name_of(estimator)) + ", k = " + std::to_string(k));
      const ThresholdResult result = threshold_select(x, k, estimator, out, ws);
      EXPECT_FALSE(result.exact_fallback);
      EXPECT_GE(result.passes, 1);
      EXPECT_LE(result.passes, 1 + kThresholdMaxCorrections);
      check_result(x, k, result, out, ref);
    }
  }
}

TEST(ThresholdEstimate, GaussianFirstGuessIsTheGaussianThreshold) {
  // On exactly normal data the Gaussian estimate for p = k / n = 0.01 is t = 2.5758 (the sample
  // mean and std are within ~1e-3 of 0 and 1), which passes 10000 +- 100 entries: the first filter
  // pass lands within bounds. The reported threshold is a magnitude between the quantiles of the
  // count bounds, p = 0.0125 (t = 2.4977) and p = 0.008 (t = 2.6521).
  const std::vector<float> x = test::synthetic(1000000, Distribution::normal, 78);
  ThresholdWorkspace ws;
  SparseVector out;
  const std::size_t k = 10000;
  const ThresholdResult result = threshold_select(x, k, ThresholdEstimator::gaussian, out, ws);
  ASSERT_FALSE(result.exact_fallback);
  EXPECT_EQ(result.passes, 1);
  EXPECT_GT(result.threshold, 2.49f);
  EXPECT_LT(result.threshold, 2.66f);
}

TEST(ThresholdSelect, ResizesOutput) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 3);
  ThresholdWorkspace ws;
  SparseVector out;
  out.resize(5000);
  out.dim = 1;
  const ThresholdResult result = threshold_select(x, 10, ThresholdEstimator::sampled, out, ws);
  EXPECT_EQ(out.indices.size(), result.count);
  EXPECT_EQ(out.values.size(), result.count);
  EXPECT_EQ(out.dim, 1000u);
}

TEST(ThresholdSelect, EmptyInput) {
  ThresholdWorkspace ws;
  SparseVector out;
  out.resize(3);
  for (const ThresholdEstimator estimator : kEstimators) {
    const ThresholdResult result = threshold_select(std::span<const float>(), 0, estimator, out, ws);
    EXPECT_EQ(result.count, 0u);
    EXPECT_TRUE(out.empty());
  }
}

// --- Bad input ------------------------------------------------------------------------------------

TEST(ThresholdBadInput, BadK) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 1);
  ThresholdWorkspace ws;
  SparseVector out;
  for (const ThresholdEstimator estimator : kEstimators) {
    EXPECT_THROW(threshold_select(x, 0, estimator, out, ws), InvalidArgument);
    EXPECT_THROW(threshold_select(x, 1001, estimator, out, ws), InvalidArgument);
    EXPECT_THROW(threshold_select(std::span<const float>(), 1, estimator, out, ws), InvalidArgument);
  }
}

TEST(ThresholdBadInput, NonFiniteThrowsInvalidData) {
  ThresholdWorkspace ws;
  SparseVector out;
  for (const std::size_t n : {1, 7, 1000, 100003}) {
    const std::vector<float> clean = test::synthetic(n, Distribution::normal, 2);
    for (const std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
      for (const float bad :
           {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
        std::vector<float> x = clean;
        x[pos] = bad;
        for (const std::size_t k : {std::size_t{1}, n / 100 + 1, n}) {
          for (const ThresholdEstimator estimator : kEstimators) {
            EXPECT_THROW(threshold_select(x, k, estimator, out, ws), InvalidData)
                << bad << " at " << pos << " of " << n << ", k = " << k << ", " << name_of(estimator);
          }
        }
      }
    }
  }
}

// --- Gaussian tail and its inverse -----------------------------------------------------------------

struct TailCase {
  double t, mean, stddev, tail;
};

void PrintTo(const TailCase& c, std::ostream* os) {
  *os << "t = " << c.t << ", mean = " << c.mean << ", stddev = " << c.stddev << ", tail = " << c.tail;
}

class GaussianTail : public ::testing::TestWithParam<TailCase> {};

TEST_P(GaussianTail, HandComputed) {
  const TailCase c = GetParam();
  EXPECT_NEAR(gaussian_two_sided_tail(c.t, c.mean, c.stddev), c.tail, 1e-7 * c.tail + 1e-12)
      << "t = " << c.t << ", mean = " << c.mean << ", stddev = " << c.stddev;
}

// Reference values: 0.5 erfc((t - m) / (s sqrt 2)) + 0.5 erfc((t + m) / (s sqrt 2)).
INSTANTIATE_TEST_SUITE_P(Values, GaussianTail,
                         ::testing::Values(TailCase{0.0, 0.0, 1.0, 1.0},
                                           TailCase{1.959964, 0.0, 1.0, 0.04999999819288482},
                                           TailCase{1.0, 0.0, 1.0, 0.31731050786291415},
                                           TailCase{2.575829, 0.0, 1.0, 0.010000008778481636},
                                           TailCase{3.290527, 0.0, 1.0, 0.0009999990456203967},
                                           TailCase{2.0 * 1.959964, 0.0, 2.0, 0.04999999819288482},
                                           TailCase{1.959964e-3, 0.0, 1e-3, 0.04999999819288482},
                                           TailCase{1.0, 1.0, 1.0, 0.5227501319481792},
                                           TailCase{3.0, 0.5, 2.0, 0.14570893053067238},
                                           TailCase{0.25, -1.0, 0.5, 0.9394024640569181}));

struct InverseCase {
  double p, mean, stddev, t;
};

void PrintTo(const InverseCase& c, std::ostream* os) {
  *os << "p = " << c.p << ", mean = " << c.mean << ", stddev = " << c.stddev << ", t = " << c.t;
}

class GaussianThreshold : public ::testing::TestWithParam<InverseCase> {};

TEST_P(GaussianThreshold, HandComputed) {
  const InverseCase c = GetParam();
  EXPECT_NEAR(gaussian_two_sided_threshold(c.p, c.mean, c.stddev), c.t, 1e-6 * c.t)
      << "p = " << c.p << ", mean = " << c.mean << ", stddev = " << c.stddev;
}

// Reference values by bisection of the tail above.
INSTANTIATE_TEST_SUITE_P(Values, GaussianThreshold,
                         ::testing::Values(InverseCase{0.05, 0.0, 1.0, 1.959963984540054},
                                           InverseCase{0.01, 0.0, 1.0, 2.575829303548901},
                                           InverseCase{0.001, 0.0, 1.0, 3.290526731491895},
                                           InverseCase{1e-6, 0.0, 1.0, 4.89163847569859},
                                           InverseCase{0.001, 0.0, 2.5, 8.226316828729738},
                                           InverseCase{0.5, 0.0, 1.0, 0.6744897501960816},
                                           InverseCase{0.001, 0.3, 1.7, 5.677032476070992},
                                           InverseCase{0.2, -2.0, 0.5, 2.420810616786457}));

TEST(GaussianTail, TailOfZeroIsOne) {
  EXPECT_DOUBLE_EQ(gaussian_two_sided_tail(0.0, 0.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(gaussian_two_sided_tail(0.0, 0.0, 1e-3), 1.0);
  EXPECT_DOUBLE_EQ(gaussian_two_sided_tail(0.0, 0.0, 1e3), 1.0);
  EXPECT_NEAR(gaussian_two_sided_threshold(1.0, 0.0, 1.0), 0.0, 1e-9);
}

TEST(GaussianTail, DecreasesInT) {
  for (const double mean : {0.0, 0.7, -3.0}) {
    double previous = 1.0 + 1e-12;
    for (double t = 0.0; t <= 12.0; t += 0.25) {
      const double tail = gaussian_two_sided_tail(t, mean, 1.5);
      EXPECT_LE(tail, previous) << "t = " << t << ", mean = " << mean;
      EXPECT_GE(tail, 0.0);
      previous = tail;
    }
  }
  EXPECT_LT(gaussian_two_sided_tail(20.0, 0.0, 1.0), 1e-80);
}

TEST(GaussianTail, ThresholdAndTailAreInverse) {
  const double ps[] = {1e-7, 1e-5, 1e-4, 1e-3, 0.004, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 0.95};
  const double params[][2] = {{0.0, 1.0}, {0.0, 1e-3}, {0.0, 40.0}, {0.3, 1.7}, {-2.0, 0.5}, {5.0, 1.0}};
  for (const auto& param : params) {
    for (const double p : ps) {
      const double t = gaussian_two_sided_threshold(p, param[0], param[1]);
      EXPECT_GE(t, 0.0);
      EXPECT_NEAR(gaussian_two_sided_tail(t, param[0], param[1]), p, 1e-6 * p)
          << "p = " << p << ", mean = " << param[0] << ", stddev = " << param[1];
    }
  }
  for (const double t : {0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 6.0}) {
    const double p = gaussian_two_sided_tail(t, 0.0, 1.0);
    EXPECT_NEAR(gaussian_two_sided_threshold(p, 0.0, 1.0), t, 1e-6 * t) << "t = " << t;
  }
}

}  // namespace
}  // namespace sparsgd::select
