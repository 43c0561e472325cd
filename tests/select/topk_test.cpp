// Exact top-k (select/topk.hpp) and the magnitude passes it is built from (select/magnitude.hpp),
// against a plain reference: a full sort of the indices by (|x| descending, index ascending).

#include "sparsgd/select/topk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "support/reference.hpp"

namespace sparsgd::select {
namespace {

using test::ReferenceTopk;
using test::same_sparse;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The strategy constants named in the design: below this length, or above this density, topk uses
// nth_element ("small"); otherwise the sampled filter (falling back to radix).
constexpr std::size_t kSmallLength = std::size_t{1} << 15;
constexpr std::size_t kSmallDensityInverse = 8;

// k values for a length: the ends (1, 2, n-1, n), a few in between, and the edges of the density
// switch.
std::vector<std::size_t> ks_for(std::size_t n) {
  if (n == 0) return {0};
  const std::size_t m = n / kSmallDensityInverse;
  std::vector<std::size_t> ks = {1, 2, 3, n / 1000, n / 100, n / 10, m, m + 1, n / 2, n - 1, n};
  if (n <= 16) {
    ks.clear();
    for (std::size_t k = 1; k <= n; ++k) ks.push_back(k);
  }
  std::vector<std::size_t> out;
  for (const std::size_t k : ks) {
    if (k >= 1 && k <= n && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool in_sampled_family(TopkPath path) {
  return path == TopkPath::sampled || path == TopkPath::sampled_tie || path == TopkPath::radix;
}

// The path must agree with the documented strategy.
void expect_plausible_path(TopkPath path, std::size_t n, std::size_t k, bool force_radix) {
  SCOPED_TRACE(std::string("path ") + to_string(path));
  if (n == 0) {
    EXPECT_EQ(path, TopkPath::empty);
  } else if (k == n) {
    EXPECT_TRUE(path == TopkPath::all || (force_radix && path == TopkPath::radix));
  } else if (force_radix) {
    EXPECT_EQ(path, TopkPath::radix);
  } else if (n < kSmallLength || k * kSmallDensityInverse > n) {
    EXPECT_EQ(path, TopkPath::small);
  } else {
    EXPECT_TRUE(in_sampled_family(path));
  }
}

// Runs topk in every form on x for each k and compares with the reference, bit for bit.
void check_against_reference(const std::vector<float>& x, const std::vector<std::size_t>& ks,
                             TopkWorkspace& ws) {
  const ReferenceTopk ref(x);
  const std::size_t n = x.size();
  SparseVector out;
  for (const std::size_t k : ks) {
    SCOPED_TRACE("n = " + std::to_string(n) + ", k = " + std::to_string(k));
    const SparseVector expected = ref.topk(k);
    for (const bool force_radix : {false, true}) {
      SCOPED_TRACE(force_radix ? "force_radix" : "default");
      const TopkPath path = topk(x, k, out, ws, TopkOptions{.force_radix = force_radix});
      ASSERT_TRUE(same_sparse(out, expected));
      expect_plausible_path(path, n, k, force_radix);
    }
    // Span form into oversized buffers: [0, k) written, the rest untouched.
    const std::size_t extra = 5;
    std::vector<std::uint32_t> idx(k + extra, 0xDEADBEEFu);
    std::vector<float> val(k + extra, -12345.0f);
    topk(x, k, idx, val, ws);
    for (std::size_t j = 0; j < extra; ++j) {
      ASSERT_EQ(idx[k + j], 0xDEADBEEFu) << "wrote past k";
      ASSERT_EQ(val[k + j], -12345.0f) << "wrote past k";
    }
    SparseVector from_span;
    from_span.dim = n;
    from_span.indices.assign(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
    from_span.values.assign(val.begin(), val.begin() + static_cast<std::ptrdiff_t>(k));
    ASSERT_TRUE(same_sparse(from_span, expected));
    if (k >= 1) {
      const KthKey kth = kth_largest_key_radix(x, k);
      EXPECT_EQ(kth.key, magnitude_key(ref.kth_magnitude(k)));
      EXPECT_EQ(kth.greater, ref.greater_than_kth(k));
    }
  }
}

// --- Synthetic distributions ---------------------------------------------------------------------

using SyntheticParam = std::tuple<std::size_t, Distribution, std::uint64_t>;

class TopkSynthetic : public ::testing::TestWithParam<SyntheticParam> {};

TEST_P(TopkSynthetic, MatchesReference) {
  const auto [n, distribution, seed] = GetParam();
  const std::vector<float> x = test::synthetic(n, distribution, seed);
  TopkWorkspace ws;
  check_against_reference(x, ks_for(n), ws);
}

std::string synthetic_name(const ::testing::TestParamInfo<SyntheticParam>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param)) + "_seed" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Small, TopkSynthetic,
                         ::testing::Combine(::testing::Values(0, 1, 7, 15, 16, 17, 1000),
                                            ::testing::ValuesIn(test::all_distributions()),
                                            ::testing::Values(1, 2, 3)),
                         synthetic_name);
// 40000 and 100000 take the sampled path for k <= n/8.
INSTANTIATE_TEST_SUITE_P(Medium, TopkSynthetic,
                         ::testing::Combine(::testing::Values(40000, 100000),
                                            ::testing::ValuesIn(test::all_distributions()),
                                            ::testing::Values(1, 2, 3)),
                         synthetic_name);
INSTANTIATE_TEST_SUITE_P(Large, TopkSynthetic,
                         ::testing::Combine(::testing::Values(1000003),
                                            ::testing::ValuesIn(test::all_distributions()),
                                            ::testing::Values(11, 12)),
                         synthetic_name);

TEST(TopkSyntheticCoverage, EveryDistributionIsTested) {
  const std::vector<std::string>& names = distribution_names();
  ASSERT_EQ(test::all_distributions().size(), names.size());
  for (const Distribution d : test::all_distributions()) {
    EXPECT_NE(std::find(names.begin(), names.end(), to_string(d)), names.end()) << to_string(d);
  }
}

TEST(TopkPathChoice, LargeNormalTakesTheSampledPath) {
  TopkWorkspace ws;
  SparseVector out;
  for (const Distribution d : {Distribution::normal, Distribution::uniform}) {
    const std::vector<float> x = test::synthetic(1000003, d, 5);
    for (const std::size_t k : {1, 10, 1000, 10000}) {
      EXPECT_EQ(topk(x, k, out, ws), TopkPath::sampled) << to_string(d) << " k = " << k;
    }
  }
}

TEST(TopkPathChoice, ConstantMagnitudesTakeTieOrRadixPath) {
  TopkWorkspace ws;
  SparseVector out;
  const std::vector<float> x = test::synthetic(200003, Distribution::constant, 5);
  for (const std::size_t k : {1, 1000, 20000}) {
    const TopkPath path = topk(x, k, out, ws);
    EXPECT_TRUE(path == TopkPath::sampled_tie || path == TopkPath::radix) << to_string(path);
    ASSERT_EQ(out.size(), k);
    for (std::size_t j = 0; j < k; ++j) ASSERT_EQ(out.indices[j], j) << "ties go to lower indices";
  }
}

TEST(TopkPathChoice, SmallAndEdgeCases) {
  TopkWorkspace ws;
  SparseVector out;
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 1);
  EXPECT_EQ(topk(std::span<const float>(), 0, out, ws), TopkPath::empty);
  EXPECT_EQ(topk(x, 1000, out, ws), TopkPath::all);
  EXPECT_EQ(topk(x, 10, out, ws), TopkPath::small);
  EXPECT_EQ(topk(x, 10, out, ws, {.force_radix = true}), TopkPath::radix);
  const std::vector<float> big = test::synthetic(100000, Distribution::normal, 1);
  EXPECT_EQ(topk(big, 50000, out, ws), TopkPath::small);  // high density
}

TEST(TopkPathChoice, NamesArePrintable) {
  for (const TopkPath p : {TopkPath::empty, TopkPath::all, TopkPath::small, TopkPath::sampled,
                           TopkPath::sampled_tie, TopkPath::radix}) {
    ASSERT_NE(to_string(p), nullptr);
    EXPECT_STRNE(to_string(p), "?");
    EXPECT_STRNE(to_string(p), "");
  }
}

// --- Adversarial inputs ----------------------------------------------------------------------------

struct Generator {
  const char* name;
  std::function<std::vector<float>(std::size_t n, Rng& rng)> make;
};

float normal(Rng& rng) {
  const double u1 = 1.0 - rng.uniform();
  const double u2 = rng.uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

float random_sign(Rng& rng, float v) { return (rng.next() & 1) ? v : -v; }

std::vector<float> zeros_mixed_sign(std::size_t n, Rng& rng) {
  std::vector<float> x(n);
  for (float& v : x) v = random_sign(rng, 0.0f);
  return x;
}

std::vector<float> zeros_with_nonzeros(std::size_t n, Rng& rng, std::size_t nonzeros) {
  std::vector<float> x = zeros_mixed_sign(n, rng);
  for (std::size_t j = 0; j < std::min(n, nonzeros); ++j) x[rng.below(n)] = normal(rng);
  return x;
}

const std::vector<Generator>& generators() {
  static const std::vector<Generator> all = {
      {"equal_magnitudes",
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) v = random_sign(rng, 0.75f);
         return x;
       }},
      {"all_zeros_both_signs", zeros_mixed_sign},
      {"few_nonzeros",  // fewer nonzeros than most k: zeros must fill up by index
       [](std::size_t n, Rng& rng) { return zeros_with_nonzeros(n, rng, 20); }},
      {"many_nonzeros",  // 5% nonzeros
       [](std::size_t n, Rng& rng) { return zeros_with_nonzeros(n, rng, n / 20 + 1); }},
      {"huge_in_noise",
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) v = normal(rng);
         for (int j = 0; j < 13; ++j) x[rng.below(n)] = random_sign(rng, 1e30f);
         x[rng.below(n)] = FLT_MAX;
         x[rng.below(n)] = -FLT_MAX;
         return x;
       }},
      {"denormals",
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) {
           const auto bits = static_cast<std::uint32_t>(rng.below(0x007FFFFFu) + 1);
           v = random_sign(rng, std::bit_cast<float>(bits));
         }
         for (std::size_t j = 0; j < n / 50 + 1; ++j) x[rng.below(n)] = random_sign(rng, 0.0f);
         x[rng.below(n)] = FLT_MIN;
         return x;
       }},
      {"denormal_ties",
       [](std::size_t n, Rng& rng) {
         const float levels[] = {0.0f, 1e-45f, 1e-40f, 1e-40f, 1e-38f};
         std::vector<float> x(n);
         for (float& v : x) v = random_sign(rng, levels[rng.below(5)]);
         return x;
       }},
      {"quantized",  // few distinct magnitudes: ties at every threshold
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) v = std::round(normal(rng) * 4.0f) / 4.0f;
         return x;
       }},
      {"ascending",
       [](std::size_t n, Rng&) {
         std::vector<float> x(n);
         for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 1e-3f;
         return x;
       }},
      {"descending",
       [](std::size_t n, Rng&) {
         std::vector<float> x(n);
         for (std::size_t i = 0; i < n; ++i) x[i] = -static_cast<float>(n - i) * 1e-3f;
         return x;
       }},
      {"periodic_16",  // every 16th entry large: hits every vector and every sample run
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (std::size_t i = 0; i < n; ++i) x[i] = (i % 16 == 5) ? 10.0f + normal(rng) : 0.01f * normal(rng);
         return x;
       }},
      {"block_at_end",  // the large entries are one contiguous block that a strided sample may miss
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) v = normal(rng);
         const std::size_t block = std::min<std::size_t>(n, 40);
         for (std::size_t i = n - block; i < n; ++i) x[i] = 100.0f + static_cast<float>(rng.below(5));
         return x;
       }},
      {"extremes_at_ends",  // largest at index 0 and in the last (scalar tail) positions
       [](std::size_t n, Rng& rng) {
         std::vector<float> x(n);
         for (float& v : x) v = normal(rng);
         x[0] = 1000.0f;
         if (n >= 4) {
           x[n - 1] = -999.0f;
           x[n - 2] = 998.0f;
           x[n - 3] = -998.0f;
         }
         return x;
       }},
      {"spikes_tied",  // zeros and every 1000th entry exactly +-1: the threshold is a tie value
       [](std::size_t n, Rng& rng) {
         std::vector<float> x = zeros_mixed_sign(n, rng);
         for (std::size_t i = 7; i < n; i += 1000) x[i] = random_sign(rng, 1.0f);
         return x;
       }},
  };
  return all;
}

using AdversarialParam = std::tuple<std::size_t, std::size_t>;  // generator index, n

class TopkAdversarial : public ::testing::TestWithParam<AdversarialParam> {};

TEST_P(TopkAdversarial, MatchesReference) {
  const auto [g, n] = GetParam();
  Rng rng(mix_seed(17, g, n));
  const std::vector<float> x = generators()[g].make(n, rng);
  ASSERT_EQ(x.size(), n);
  std::vector<std::size_t> ks = ks_for(n);
  // k around the number of nonzeros of the sparse generators.
  for (const std::size_t k : {19, 20, 21, 41, 100, 101}) {
    if (k <= n) ks.push_back(k);
  }
  TopkWorkspace ws;
  check_against_reference(x, ks, ws);
}

// Lengths that are not multiples of 8 or 16 (vector tails), around the small/sampled switch.
INSTANTIATE_TEST_SUITE_P(Inputs, TopkAdversarial,
                         ::testing::Combine(::testing::Range<std::size_t>(0, 14),
                                            ::testing::Values(1, 7, 13, 1000, 1001, 32767, 32771, 40000,
                                                              100003, 262147)),
                         [](const ::testing::TestParamInfo<AdversarialParam>& param_info) {
                           return std::string(generators()[std::get<0>(param_info.param)].name) + "_n" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

TEST(TopkGenerators, ListMatchesInstantiation) { EXPECT_EQ(generators().size(), 14u); }

TEST(TopkTies, LowerIndexWinsAcrossSignsAndZeros) {
  // |-2| == |2|: the lower index wins regardless of sign; -0 and +0 tie too.
  const std::vector<float> x = {1.0f, -2.0f, 0.0f, 2.0f, -0.0f, -1.0f, 0.0f, 3.0f};
  TopkWorkspace ws;
  SparseVector out;
  topk(x, 2, out, ws);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{1, 7}));
  topk(x, 3, out, ws);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{1, 3, 7}));
  topk(x, 4, out, ws);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{0, 1, 3, 7}));
  topk(x, 6, out, ws);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{0, 1, 2, 3, 5, 7}));
  topk(x, 7, out, ws);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(test::bits_of(out.values[4]), test::bits_of(-0.0f)) << "the sign of -0 is kept";
}

TEST(TopkOutput, ConvenienceFormResizesAndSetsDim) {
  const std::vector<float> x = test::synthetic(1000, Distribution::normal, 3);
  TopkWorkspace ws;
  SparseVector out;
  out.dim = 3;
  out.resize(5000);
  topk(x, 10, out, ws);
  EXPECT_EQ(out.dim, 1000u);
  EXPECT_EQ(out.indices.size(), 10u);
  EXPECT_EQ(out.values.size(), 10u);
  topk(std::span<const float>(), 0, out, ws);
  EXPECT_EQ(out.dim, 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.values.size(), 0u);
}

TEST(TopkOutput, WorkspaceReuseAcrossShapes) {
  // One workspace across lengths and paths, large to small and back.
  TopkWorkspace ws;
  SparseVector out;
  for (const std::size_t n : {300000, 10, 100000, 40000, 1000, 262147}) {
    const std::vector<float> x = test::synthetic(n, Distribution::normal, n);
    const ReferenceTopk ref(x);
    for (const std::size_t k : {std::size_t{1}, n / 100 + 1, n / 3}) {
      topk(x, k, out, ws);
      ASSERT_TRUE(same_sparse(out, ref.topk(k))) << "n = " << n << ", k = " << k;
    }
  }
}

// --- Bad input ----------------------------------------------------------------------------------

TEST(TopkBadInput, KAboveNThrows) {
  TopkWorkspace ws;
  SparseVector out;
  for (const std::size_t n : {0, 1, 7, 100000}) {
    const std::vector<float> x = test::synthetic(n, Distribution::normal, 1);
    for (const bool force_radix : {false, true}) {
      EXPECT_THROW(topk(x, n + 1, out, ws, {.force_radix = force_radix}), InvalidArgument) << n;
      EXPECT_THROW(topk(x, n + 1000, out, ws, {.force_radix = force_radix}), InvalidArgument) << n;
      std::vector<std::uint32_t> idx(n + 1);
      std::vector<float> val(n + 1);
      EXPECT_THROW(topk(x, n + 1, idx, val, ws, {.force_radix = force_radix}), InvalidArgument) << n;
    }
  }
}

TEST(TopkBadInput, ZeroKForNonEmptyThrows) {
  TopkWorkspace ws;
  SparseVector out;
  for (const std::size_t n : {1, 7, 100000}) {
    const std::vector<float> x = test::synthetic(n, Distribution::normal, 1);
    EXPECT_THROW(topk(x, 0, out, ws), InvalidArgument) << n;
    EXPECT_THROW(topk(x, 0, out, ws, {.force_radix = true}), InvalidArgument) << n;
    std::vector<std::uint32_t> idx(1);
    std::vector<float> val(1);
    EXPECT_THROW(topk(x, 0, idx, val, ws), InvalidArgument) << n;
  }
}

TEST(TopkBadInput, EmptyInputWithZeroKIsFine) {
  TopkWorkspace ws;
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  EXPECT_EQ(topk(std::span<const float>(), 0, idx, val, ws), TopkPath::empty);
}

TEST(TopkBadInput, ShortOutputsThrow) {
  TopkWorkspace ws;
  for (const std::size_t n : {7, 1000, 100000}) {
    const std::vector<float> x = test::synthetic(n, Distribution::normal, 1);
    for (const std::size_t k : {std::size_t{1}, n / 10 + 1, n}) {
      std::vector<std::uint32_t> idx_ok(k), idx_short(k - 1);
      std::vector<float> val_ok(k), val_short(k - 1);
      EXPECT_THROW(topk(x, k, idx_short, val_ok, ws), InvalidArgument) << n << " " << k;
      EXPECT_THROW(topk(x, k, idx_ok, val_short, ws), InvalidArgument) << n << " " << k;
      EXPECT_THROW(topk(x, k, idx_short, val_short, ws), InvalidArgument) << n << " " << k;
      EXPECT_THROW(topk(x, k, idx_short, val_ok, ws, {.force_radix = true}), InvalidArgument);
      EXPECT_NO_THROW(topk(x, k, idx_ok, val_ok, ws));
    }
  }
}

using NonFiniteParam = std::tuple<std::size_t, float>;

class TopkNonFinite : public ::testing::TestWithParam<NonFiniteParam> {};

TEST_P(TopkNonFinite, ThrowsInvalidDataWherever) {
  const auto [n, bad] = GetParam();
  const std::vector<float> clean = test::synthetic(n, Distribution::normal, 21);
  TopkWorkspace ws;
  SparseVector out;
  std::vector<std::size_t> positions = {0, n / 2, n - 1};
  if (n > 20) positions.push_back(n - 5);
  std::vector<std::size_t> ks = {1, n / 100 + 1, n / 3 + 1, n - 1, n};
  for (const std::size_t pos : positions) {
    std::vector<float> x = clean;
    x[pos] = bad;
    for (const std::size_t k : ks) {
      if (k < 1 || k > n) continue;
      for (const bool force_radix : {false, true}) {
        EXPECT_THROW(topk(x, k, out, ws, {.force_radix = force_radix}), InvalidData)
            << "value " << bad << " at " << pos << " of " << n << ", k = " << k
            << (force_radix ? " (radix)" : "");
      }
    }
  }
  // Non-finite values far below and far above the selected ones alike; and the data still works
  // afterwards with the same workspace.
  EXPECT_NO_THROW(topk(clean, 1, out, ws));
}

INSTANTIATE_TEST_SUITE_P(Values, TopkNonFinite,
                         ::testing::Combine(::testing::Values(1, 2, 7, 33, 1000, 40000, 100003, 1000003),
                                            ::testing::Values(kNaN, -kNaN, kInf, -kInf)),
                         [](const ::testing::TestParamInfo<NonFiniteParam>& param_info) {
                           const float v = std::get<1>(param_info.param);
                           const std::string kind = std::isnan(v) ? (std::signbit(v) ? "negnan" : "nan")
                                                                  : (v > 0 ? "posinf" : "neginf");
                           return "n" + std::to_string(std::get<0>(param_info.param)) + "_" + kind;
                         });

TEST(TopkNonFiniteSpread, ManyNaNsAmongTiedZeros) {
  // Zeros everywhere and NaNs sprinkled: NaN keys are above every finite key, so a kernel that
  // trusted keys blindly would return them.
  std::vector<float> x(100000, 0.0f);
  for (std::size_t i = 3; i < x.size(); i += 997) x[i] = kNaN;
  TopkWorkspace ws;
  SparseVector out;
  EXPECT_THROW(topk(x, 10, out, ws), InvalidData);
  EXPECT_THROW(topk(x, 10, out, ws, {.force_radix = true}), InvalidData);
}

// --- Magnitude keys and kernels -----------------------------------------------------------------

TEST(MagnitudeKey, OrderMatchesAbsoluteValue) {
  const float ascending[] = {0.0f, 1e-45f, 1e-40f, FLT_MIN, 1e-10f, 0.5f, 1.0f, 1.5f, 1e30f, FLT_MAX};
  for (std::size_t i = 1; i < std::size(ascending); ++i) {
    EXPECT_LT(magnitude_key(ascending[i - 1]), magnitude_key(ascending[i])) << ascending[i];
    EXPECT_LT(magnitude_key(-ascending[i - 1]), magnitude_key(ascending[i])) << ascending[i];
    EXPECT_EQ(magnitude_key(-ascending[i]), magnitude_key(ascending[i]));
    EXPECT_EQ(key_to_magnitude(magnitude_key(-ascending[i])), ascending[i]);
  }
  EXPECT_EQ(magnitude_key(-0.0f), 0u);
  EXPECT_EQ(magnitude_key(0.0f), 0u);
  EXPECT_LT(magnitude_key(FLT_MAX), kNonFiniteKey);
  EXPECT_EQ(magnitude_key(kInf), kNonFiniteKey);
  EXPECT_EQ(magnitude_key(-kInf), kNonFiniteKey);
  EXPECT_GT(magnitude_key(kNaN), kNonFiniteKey);
  EXPECT_GT(magnitude_key(-kNaN), kNonFiniteKey);
}

TEST(MaxMagnitudeKey, MatchesScalarMaxForEveryTailLength) {
  Rng rng(3);
  EXPECT_EQ(max_magnitude_key(std::span<const float>()), 0u);
  for (std::size_t n = 1; n <= 80; ++n) {
    for (std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      x[pos] = -50.0f;
      EXPECT_EQ(max_magnitude_key(x), magnitude_key(50.0f)) << "n = " << n << ", pos = " << pos;
    }
  }
  std::vector<float> big = test::synthetic(1000003, Distribution::normal, 4);
  big[1000002] = -77.0f;
  EXPECT_EQ(max_magnitude_key(big), magnitude_key(77.0f));
  big[1000002] = kNaN;
  EXPECT_GE(max_magnitude_key(big), kNonFiniteKey);
}

TEST(FilterGreater, MatchesScalarFilter) {
  Rng rng(8);
  for (const std::size_t n : {0, 1, 5, 16, 17, 31, 33, 100, 1000, 4099, 100003}) {
    std::vector<float> x(n);
    for (float& v : x) v = std::round(normal(rng) * 8.0f) / 8.0f;  // ties at the pivot
    for (const float pivot_value : {0.0f, 0.5f, 1.0f, 2.5f, 10.0f}) {
      const std::uint32_t pivot = magnitude_key(pivot_value);
      std::vector<std::uint32_t> want_idx;
      std::size_t want_equal = 0;
      std::uint32_t want_max = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t key = magnitude_key(x[i]);
        want_max = std::max(want_max, key);
        if (key > pivot) want_idx.push_back(static_cast<std::uint32_t>(i));
        if (key == pivot) ++want_equal;
      }
      for (const std::size_t capacity : {want_idx.size(), want_idx.size() / 2, std::size_t{0}, n}) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", pivot = " + std::to_string(pivot_value) +
                     ", capacity = " + std::to_string(capacity));
        std::vector<std::uint32_t> idx(capacity + filter_padding(), 0xFFFFFFFFu);
        std::vector<float> val(capacity + filter_padding(), 0.0f);
        const FilterCounts c = filter_greater(x, pivot, idx.data(), val.data(), capacity);
        EXPECT_EQ(c.greater, want_idx.size());
        EXPECT_EQ(c.equal, want_equal);
        EXPECT_EQ(c.max_key, want_max);
        EXPECT_LE(c.stored, capacity);
        if (want_idx.size() <= capacity) {
          EXPECT_EQ(c.stored, want_idx.size());
          EXPECT_FALSE(c.overflow());
        } else {
          EXPECT_TRUE(c.overflow());
        }
        // What was stored is a prefix, in index order, of the entries above the pivot.
        for (std::size_t j = 0; j < c.stored; ++j) {
          ASSERT_EQ(idx[j], want_idx[j]) << j;
          ASSERT_EQ(test::bits_of(val[j]), test::bits_of(x[want_idx[j]])) << j;
        }
      }
    }
  }
}

TEST(CheckFinite, NamesTheFirstBadEntry) {
  std::vector<float> x(20000, 1.0f);
  EXPECT_NO_THROW(check_finite(x, "gradient"));
  EXPECT_NO_THROW(check_finite(std::span<const float>(), "gradient"));
  x[12345] = kInf;
  x[17777] = kNaN;
  try {
    check_finite(x, "gradient");
    FAIL() << "no throw";
  } catch (const InvalidData& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("12345"), std::string::npos) << what;
    EXPECT_NE(what.find("gradient"), std::string::npos) << what;
  }
  for (const std::size_t pos : {0, 1, 15, 16, 19999}) {
    std::vector<float> y(20000, -3.0f);
    y[pos] = -kNaN;
    EXPECT_THROW(check_finite(y, "y"), InvalidData) << pos;
  }
}

// Mean and population standard deviation in double, two passes.
std::pair<double, double> reference_moments(const std::vector<float>& x) {
  double sum = 0.0;
  for (const float v : x) sum += v;
  const double mean = sum / static_cast<double>(x.size());
  double sq = 0.0;
  for (const float v : x) sq += (v - mean) * (v - mean);
  return {mean, std::sqrt(sq / static_cast<double>(x.size()))};
}

TEST(Moments, MatchDoubleReferenceForEveryTailLength) {
  Rng rng(6);
  for (std::size_t n = 2; n <= 80; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    const auto [mean, stddev] = reference_moments(x);
    const Moments m = moments(x);
    EXPECT_TRUE(m.finite);
    EXPECT_NEAR(m.mean, mean, 1e-6) << "n = " << n;
    EXPECT_NEAR(m.stddev, stddev, 1e-6 * stddev) << "n = " << n;
  }
  for (const Distribution d : test::all_distributions()) {
    const std::vector<float> x = test::synthetic(100003, d, 6);
    const auto [mean, stddev] = reference_moments(x);
    const Moments m = moments(x);
    EXPECT_TRUE(m.finite);
    EXPECT_NEAR(m.mean, mean, 1e-6 * stddev) << to_string(d);
    EXPECT_NEAR(m.stddev, stddev, 1e-5 * stddev) << to_string(d);
  }
}

TEST(Moments, HugeFiniteValuesStayFinite) {
  // Squares of 1e30 overflow float but not double.
  std::vector<float> x = test::synthetic(10007, Distribution::normal, 7);
  x[5] = 1e30f;
  x[10006] = -3e38f;
  const auto [mean, stddev] = reference_moments(x);
  const Moments m = moments(x);
  EXPECT_TRUE(m.finite);
  EXPECT_NEAR(m.mean, mean, 1e-6 * std::fabs(mean));
  EXPECT_NEAR(m.stddev, stddev, 1e-6 * stddev);
}

TEST(Moments, NonFiniteIsFlagged) {
  for (const std::size_t n : {1, 7, 33, 10007}) {
    for (const std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
      for (const float bad : {kNaN, kInf, -kInf}) {
        std::vector<float> x = test::synthetic(n, Distribution::normal, 8);
        x[pos] = bad;
        EXPECT_FALSE(moments(x).finite) << bad << " at " << pos << " of " << n;
      }
    }
  }
}

TEST(Moments, LargeOffsetKeepsPrecision) {
  // Values 1000 + 0.01 N(0, 1): sum-of-squares minus squared mean in float lanes cancels
  // catastrophically; the standard deviation must still come out near 0.01. (The Gaussian
  // threshold estimate rests on it.)
  for (const double offset : {3.0, 100.0, 1000.0}) {
    for (const double scale : {1.0, 0.01}) {
      std::vector<float> x = test::synthetic(1000003, Distribution::normal, 9);
      for (float& v : x) v = static_cast<float>(offset + scale * v);
      const auto [mean, stddev] = reference_moments(x);
      const Moments m = moments(x);
      EXPECT_NEAR(m.mean, mean, 1e-3 * stddev) << "offset " << offset << ", scale " << scale;
      EXPECT_NEAR(m.stddev, stddev, 1e-3 * stddev) << "offset " << offset << ", scale " << scale;
    }
  }
}

}  // namespace
}  // namespace sparsgd::select
