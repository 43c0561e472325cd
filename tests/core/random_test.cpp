// Rng, splitmix64 and mix_seed (core/random.hpp).

#include "sparsgd/core/random.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace sparsgd {
namespace {

// Upper chi-square quantile by Wilson-Hilferty at normal quantile z (z = 5: about 3e-7).
double chi_square_bound(double df, double z = 5.0) {
  const double a = 2.0 / (9.0 * df);
  const double c = 1.0 - a + z * std::sqrt(a);
  return df * c * c * c;
}

// Pearson's statistic for counts of a multinomial with the given cell probabilities.
double pearson(const std::vector<std::size_t>& counts, const std::vector<double>& probabilities,
               std::size_t draws) {
  double stat = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * static_cast<double>(draws);
    const double d = static_cast<double>(counts[i]) - expected;
    stat += d * d / expected;
  }
  return stat;
}

TEST(SplitMix64, MatchesThePublishedGenerator) {
  // SplitMix64 (Steele, Lea, Flood) seeded with 0: its first output is 0xe220a8397b1dcdaf. Each
  // call of splitmix64(x) is one step from state x, so chaining state + gamma reproduces the stream.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ULL), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(splitmix64(2 * 0x9e3779b97f4a7c15ULL), 0x06c45d188009454fULL);
}

// Reference xoshiro256** from Blackman and Vigna's public-domain C code.
struct ReferenceXoshiro {
  std::uint64_t s[4];
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

TEST(Rng, IsXoshiro256StarStarSeededBySplitMix) {
  for (const std::uint64_t seed : {0ULL, 1ULL, 42ULL, 0xdeadbeefcafef00dULL}) {
    ReferenceXoshiro ref{};
    std::uint64_t s = seed;
    for (auto& word : ref.s) {
      s = splitmix64(s);
      word = s;
    }
    Rng rng(seed);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(rng.next(), ref.next()) << "seed " << seed << " draw " << i;
  }
}

TEST(Rng, SameSeedSameSequence) {
  Rng a(12345), b(12345);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(a.next(), b.next()) << i;
    ASSERT_EQ(a.below(1000003), b.below(1000003)) << i;
    ASSERT_EQ(a.uniform(), b.uniform()) << i;
  }
}

TEST(Rng, DifferentSeedsDifferentSequences) {
  std::set<std::uint64_t> first;
  for (std::uint64_t seed = 0; seed < 1000; ++seed) first.insert(Rng(seed).next());
  EXPECT_EQ(first.size(), 1000u);
  Rng a(7), b(8);
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.next() == b.next() ? 1 : 0;
  EXPECT_EQ(equal, 0);
}

TEST(Rng, BelowStaysInRange) {
  Rng rng(99);
  const std::uint64_t bounds[] = {
      1, 2, 3, 7, 10, 1000, 1000003, (1ULL << 32) + 1, (1ULL << 63) + 12345, 0xFFFFFFFFFFFFFFFFULL};
  for (const std::uint64_t bound : bounds) {
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t v = rng.below(bound);
      ASSERT_LT(v, bound) << "bound " << bound;
    }
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(rng.below(1), 0u);
}

TEST(Rng, BelowReachesBothEnds) {
  Rng rng(5);
  for (const std::uint64_t bound : {2ULL, 3ULL, 7ULL, 100ULL}) {
    bool low = false, high = false;
    for (int i = 0; i < 10000; ++i) {
      const std::uint64_t v = rng.below(bound);
      low = low || v == 0;
      high = high || v == bound - 1;
    }
    EXPECT_TRUE(low) << bound;
    EXPECT_TRUE(high) << bound;
  }
}

class BelowUniformity : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(BelowUniformity, ChiSquareOverEveryValue) {
  const std::uint64_t bound = GetParam();
  const std::size_t draws = 200000;
  std::vector<std::size_t> counts(bound, 0);
  Rng rng(mix_seed(2024, bound));
  for (std::size_t i = 0; i < draws; ++i) ++counts[rng.below(bound)];
  const std::vector<double> p(bound, 1.0 / static_cast<double>(bound));
  const double stat = pearson(counts, p, draws);
  EXPECT_LT(stat, chi_square_bound(static_cast<double>(bound - 1))) << "bound " << bound;
}

INSTANTIATE_TEST_SUITE_P(Bounds, BelowUniformity, ::testing::Values(2, 3, 7, 10, 50, 97, 1000));

TEST(Rng, BelowUnbiasedForHugeBound) {
  // bound = 3 * 2^62 does not divide 2^64: a plain `next() % bound` would give the lowest quarter
  // of the range twice the probability. Cells [0, 2^62), [2^62, 2^63), [2^63, 3 * 2^62) must be
  // equally likely.
  const std::uint64_t quarter = 1ULL << 62;
  const std::uint64_t bound = 3 * quarter;
  const std::size_t draws = 60000;
  std::vector<std::size_t> counts(3, 0);
  Rng rng(77);
  for (std::size_t i = 0; i < draws; ++i) {
    const std::uint64_t v = rng.below(bound);
    ASSERT_LT(v, bound);
    ++counts[v / quarter];
  }
  EXPECT_LT(pearson(counts, {1.0 / 3, 1.0 / 3, 1.0 / 3}, draws), chi_square_bound(2.0));
}

TEST(Rng, UniformIsInUnitIntervalAndUniform) {
  Rng rng(31337);
  const std::size_t draws = 200000;
  const std::size_t cells = 64;
  std::vector<std::size_t> counts(cells, 0);
  double sum = 0.0;
  for (std::size_t i = 0; i < draws; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++counts[static_cast<std::size_t>(u * cells)];
  }
  // Mean 1/2, standard error sqrt(1/12 / draws) ~ 6.5e-4.
  EXPECT_NEAR(sum / static_cast<double>(draws), 0.5, 5 * 6.5e-4);
  EXPECT_LT(pearson(counts, std::vector<double>(cells, 1.0 / cells), draws),
            chi_square_bound(static_cast<double>(cells - 1)));
}

TEST(Rng, NextBitsAreBalanced) {
  // Each of the 64 output bits is set about half of the time.
  Rng rng(4242);
  const std::size_t draws = 100000;
  std::array<std::size_t, 64> ones{};
  for (std::size_t i = 0; i < draws; ++i) {
    const std::uint64_t v = rng.next();
    for (int b = 0; b < 64; ++b) ones[b] += (v >> b) & 1;
  }
  // Binomial(draws, 1/2): standard deviation ~158; 6 of them.
  for (int b = 0; b < 64; ++b) {
    EXPECT_NEAR(static_cast<double>(ones[b]), draws / 2.0, 6 * 158.0) << "bit " << b;
  }
}

TEST(MixSeed, DiffersPerStream) {
  // Every (seed, a, b) of a grid gives a different stream seed, in particular (a, b) != (b, a),
  // neighbouring iterations and neighbouring ranks.
  std::set<std::uint64_t> seen;
  std::size_t total = 0;
  for (std::uint64_t seed : {0ULL, 1ULL, 2ULL, 0xFFFFFFFFFFFFFFFFULL}) {
    for (std::uint64_t a = 0; a < 64; ++a) {
      for (std::uint64_t b = 0; b < 64; ++b) {
        seen.insert(mix_seed(seed, a, b));
        ++total;
      }
    }
  }
  EXPECT_EQ(seen.size(), total);
}

TEST(MixSeed, DefaultStreamIsZero) {
  EXPECT_EQ(mix_seed(9, 4), mix_seed(9, 4, 0));
  EXPECT_NE(mix_seed(9, 4), mix_seed(9, 4, 1));
  EXPECT_NE(mix_seed(9, 4), mix_seed(9, 5));
  EXPECT_NE(mix_seed(9, 4), mix_seed(10, 4));
}

// mix_seed and splitmix64 are usable in constant expressions.
static_assert(mix_seed(123, 456, 789) != mix_seed(123, 789, 456));
static_assert(splitmix64(0) == 0xe220a8397b1dcdafULL);

TEST(MixSeed, StreamsAreUncorrelated) {
  // The first draws of generators seeded by consecutive streams look independent: the low bit
  // agrees between neighbours about half the time.
  const std::size_t streams = 20000;
  std::size_t agree = 0;
  std::uint64_t previous = Rng(mix_seed(5, 0)).next();
  for (std::uint64_t s = 1; s <= streams; ++s) {
    const std::uint64_t v = Rng(mix_seed(5, s)).next();
    agree += ((v ^ previous) & 1) == 0 ? 1 : 0;
    previous = v;
  }
  // Binomial(20000, 1/2): standard deviation ~71.
  EXPECT_NEAR(static_cast<double>(agree), streams / 2.0, 6 * 71.0);
}

}  // namespace
}  // namespace sparsgd
