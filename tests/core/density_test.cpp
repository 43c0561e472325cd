// k_from_density, validate_density, validate_k, validate_length (core/density.hpp).

#include "sparsgd/core/density.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct KCase {
  std::size_t n;
  double density;
  std::size_t k;
};

void PrintTo(const KCase& c, std::ostream* os) {
  *os << "n = " << c.n << ", density = " << c.density << ", k = " << c.k;
}

class KFromDensity : public ::testing::TestWithParam<KCase> {};

TEST_P(KFromDensity, MatchesHandComputedValue) {
  const KCase c = GetParam();
  EXPECT_EQ(k_from_density(c.n, c.density), c.k) << "n = " << c.n << ", density = " << c.density;
}

INSTANTIATE_TEST_SUITE_P(Rounding, KFromDensity,
                         ::testing::Values(
                             // round to nearest, not truncation and not ceiling
                             KCase{1000, 0.0014, 1}, KCase{1000, 0.0016, 2}, KCase{1000, 0.0024, 2},
                             KCase{1000, 0.0026, 3}, KCase{1000003, 0.001, 1000},
                             KCase{25000000, 0.001, 25000},
                             KCase{999, 0.5, 500},  // 499.5 exactly: halves round away from zero (std::round)
                             KCase{4, 0.625, 3},    // 2.5 exactly
                             KCase{4, 0.375, 2},    // 1.5 exactly
                             KCase{10, 0.1, 1}, KCase{100, 0.29, 29}, KCase{7, 1.0 / 7.0, 1},
                             KCase{7, 6.0 / 7.0, 6}, KCase{1u << 20, 1.0 / 1024.0, 1024}));

INSTANTIATE_TEST_SUITE_P(Clamp, KFromDensity,
                         ::testing::Values(
                             // at least 1 for n > 0, however small the density
                             KCase{1000, 1e-9, 1}, KCase{1000, 0.0004, 1}, KCase{1, 0.001, 1},
                             KCase{1, std::numeric_limits<double>::denorm_min(), 1},
                             // density 1 keeps everything
                             KCase{1, 1.0, 1}, KCase{1000, 1.0, 1000}, KCase{1000003, 1.0, 1000003},
                             // n == 0 keeps nothing
                             KCase{0, 0.001, 0}, KCase{0, 1.0, 0}, KCase{0, 1e-12, 0}));

class BadDensity : public ::testing::TestWithParam<double> {};

TEST_P(BadDensity, ValidateDensityThrowsInvalidArgument) {
  EXPECT_THROW(validate_density(GetParam()), InvalidArgument);
}

TEST_P(BadDensity, KFromDensityThrowsForAnyLength) {
  EXPECT_THROW(k_from_density(1000, GetParam()), InvalidArgument);
  EXPECT_THROW(k_from_density(1, GetParam()), InvalidArgument);
  EXPECT_THROW(k_from_density(0, GetParam()), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Density, BadDensity,
                         ::testing::Values(0.0, -0.0, -1e-300, -0.001, -1.0, 1.0000000000000002, 1.001, 2.0,
                                           1e300, kNaN, -kNaN, kInf, -kInf));

TEST(ValidateDensity, AcceptsTheWholeOpenClosedInterval) {
  for (const double d :
       {std::numeric_limits<double>::denorm_min(), 1e-300, 1e-9, 0.001, 0.5, 0.9999999999999999, 1.0}) {
    EXPECT_NO_THROW(validate_density(d)) << d;
  }
}

TEST(ValidateDensity, MessageNamesTheValue) {
  try {
    validate_density(2.5);
    FAIL() << "validate_density(2.5) did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2.5"), std::string::npos) << e.what();
  }
}

TEST(ValidateDensity, ErrorsDeriveFromTheLibraryBase) {
  EXPECT_THROW(validate_density(-1.0), Error);
  EXPECT_THROW(validate_density(-1.0), std::runtime_error);
}

TEST(ValidateK, AcceptsOneToN) {
  EXPECT_NO_THROW(validate_k(0, 0));
  EXPECT_NO_THROW(validate_k(1, 1));
  EXPECT_NO_THROW(validate_k(5, 1));
  EXPECT_NO_THROW(validate_k(5, 3));
  EXPECT_NO_THROW(validate_k(5, 5));
  EXPECT_NO_THROW(validate_k(1000003, 1000003));
}

TEST(ValidateK, RejectsKAboveN) {
  EXPECT_THROW(validate_k(5, 6), InvalidArgument);
  EXPECT_THROW(validate_k(0, 1), InvalidArgument);
  EXPECT_THROW(validate_k(1000, 1001), InvalidArgument);
  EXPECT_THROW(validate_k(1000, std::numeric_limits<std::size_t>::max()), InvalidArgument);
}

TEST(ValidateK, RejectsZeroForNonEmpty) {
  EXPECT_THROW(validate_k(1, 0), InvalidArgument);
  EXPECT_THROW(validate_k(5, 0), InvalidArgument);
  EXPECT_THROW(validate_k(1000003, 0), InvalidArgument);
}

TEST(ValidateK, MessageNamesBothOperands) {
  try {
    validate_k(517, 9041);
    FAIL() << "validate_k(517, 9041) did not throw";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("517"), std::string::npos) << what;
    EXPECT_NE(what.find("9041"), std::string::npos) << what;
  }
}

TEST(ValidateLength, IndicesMustFitInUint32) {
  EXPECT_NO_THROW(validate_length(0));
  EXPECT_NO_THROW(validate_length(1000003));
  EXPECT_NO_THROW(validate_length(std::size_t{1} << 31));
  EXPECT_NO_THROW(validate_length(std::numeric_limits<std::uint32_t>::max()));
  EXPECT_THROW(validate_length((std::size_t{1} << 32) + 1), InvalidArgument);
  EXPECT_THROW(validate_length(std::size_t{1} << 40), InvalidArgument);
  EXPECT_THROW(validate_length(std::numeric_limits<std::size_t>::max()), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd
