#pragma once
// Plain references and checks shared by the test binaries. Everything here is written for
// obviousness, not speed: a full sort by (|x| descending, index ascending) defines the exact top-k.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
#include "sparsgd/core/synthetic.hpp"

namespace sparsgd {
// Readable test parameters in gtest's output.
inline void PrintTo(Distribution distribution, std::ostream* os) { *os << to_string(distribution); }
}  // namespace sparsgd

namespace sparsgd::test {

inline const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> all = {Distribution::normal, Distribution::uniform,
                                                Distribution::constant, Distribution::sparse,
                                                Distribution::heavy};
  return all;
}

inline std::vector<float> synthetic(std::size_t n, Distribution distribution, std::uint64_t seed) {
  std::vector<float> x(n);
  fill_synthetic(x, distribution, seed);
  return x;
}

inline std::uint32_t bits_of(float v) { return std::bit_cast<std::uint32_t>(v); }

// Exact top-k by a full sort of the indices. Built once per data set; topk(k) for any k is then a
// single pass.
class ReferenceTopk {
 public:
  explicit ReferenceTopk(std::span<const float> x) : x_(x.begin(), x.end()), order_(x.size()) {
    std::iota(order_.begin(), order_.end(), std::uint32_t{0});
    std::sort(order_.begin(), order_.end(), [this](std::uint32_t a, std::uint32_t b) {
      const float ma = std::fabs(x_[a]);
      const float mb = std::fabs(x_[b]);
      if (ma != mb) return ma > mb;
      return a < b;
    });
    rank_.resize(order_.size());
    for (std::size_t r = 0; r < order_.size(); ++r) rank_[order_[r]] = r;
  }

  std::size_t size() const { return x_.size(); }
  // Indices ordered by (|x| descending, index ascending).
  const std::vector<std::uint32_t>& order() const { return order_; }
  // Position of index i in order().
  std::size_t rank(std::size_t i) const { return rank_[i]; }

  // The k selected entries in ascending index order, dim = n.
  SparseVector topk(std::size_t k) const {
    SparseVector out;
    out.dim = x_.size();
    for (std::size_t i = 0; i < x_.size(); ++i) {
      if (rank_[i] < k) {
        out.indices.push_back(static_cast<std::uint32_t>(i));
        out.values.push_back(x_[i]);
      }
    }
    return out;
  }

  // Magnitude (as a float) of the k-th largest entry, 1 <= k <= n.
  float kth_magnitude(std::size_t k) const { return std::fabs(x_[order_[k - 1]]); }
  // Number of entries whose magnitude is strictly greater than the k-th largest.
  std::size_t greater_than_kth(std::size_t k) const {
    const float m = kth_magnitude(k);
    std::size_t count = 0;
    for (std::size_t r = 0; r + 1 < k; ++r) count += std::fabs(x_[order_[r]]) > m ? 1 : 0;
    return count;
  }

 private:
  std::vector<float> x_;
  std::vector<std::uint32_t> order_;
  std::vector<std::size_t> rank_;
};

// Same indices, bitwise-same values (so -0 and +0 are told apart), same dim.
inline ::testing::AssertionResult same_sparse(const SparseVector& actual, const SparseVector& expected) {
  if (actual.indices.size() != actual.values.size()) {
    return ::testing::AssertionFailure()
           << "actual has " << actual.indices.size() << " indices but " << actual.values.size() << " values";
  }
  if (actual.dim != expected.dim) {
    return ::testing::AssertionFailure() << "dim " << actual.dim << ", expected " << expected.dim;
  }
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << ", expected " << expected.size();
  }
  for (std::size_t j = 0; j < actual.size(); ++j) {
    if (actual.indices[j] != expected.indices[j]) {
      return ::testing::AssertionFailure()
             << "entry " << j << ": index " << actual.indices[j] << ", expected " << expected.indices[j];
    }
    if (bits_of(actual.values[j]) != bits_of(expected.values[j])) {
      return ::testing::AssertionFailure() << "entry " << j << " (index " << actual.indices[j] << "): value "
                                           << actual.values[j] << ", expected " << expected.values[j];
    }
  }
  return ::testing::AssertionSuccess();
}

// Indices strictly ascending (hence distinct), below x.size(), values bitwise equal to x there.
inline ::testing::AssertionResult valid_entries(std::span<const std::uint32_t> indices,
                                                std::span<const float> values, std::span<const float> x) {
  if (indices.size() != values.size()) {
    return ::testing::AssertionFailure() << indices.size() << " indices but " << values.size() << " values";
  }
  for (std::size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] >= x.size()) {
      return ::testing::AssertionFailure()
             << "entry " << j << ": index " << indices[j] << " out of range n = " << x.size();
    }
    if (j > 0 && indices[j] <= indices[j - 1]) {
      return ::testing::AssertionFailure()
             << "entry " << j << ": index " << indices[j] << " not above the previous " << indices[j - 1];
    }
    if (bits_of(values[j]) != bits_of(x[indices[j]])) {
      return ::testing::AssertionFailure() << "entry " << j << " (index " << indices[j] << "): value "
                                           << values[j] << " but x holds " << x[indices[j]];
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult valid_selection(const SparseVector& out, std::span<const float> x) {
  if (out.dim != x.size()) {
    return ::testing::AssertionFailure() << "dim " << out.dim << ", expected " << x.size();
  }
  return valid_entries(out.indices, out.values, x);
}

// Every selected |x| is >= every unselected |x| (a selection by magnitude threshold).
inline ::testing::AssertionResult selection_by_magnitude(const SparseVector& out, std::span<const float> x) {
  std::vector<char> selected(x.size(), 0);
  for (const std::uint32_t i : out.indices) {
    if (i >= x.size()) return ::testing::AssertionFailure() << "index " << i << " out of range";
    selected[i] = 1;
  }
  float min_selected = INFINITY;
  float max_unselected = -1.0f;
  std::size_t arg_min = 0, arg_max = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float m = std::fabs(x[i]);
    if (selected[i] && m < min_selected) {
      min_selected = m;
      arg_min = i;
    }
    if (!selected[i] && m > max_unselected) {
      max_unselected = m;
      arg_max = i;
    }
  }
  if (!out.indices.empty() && max_unselected > min_selected) {
    return ::testing::AssertionFailure()
           << "selected |x[" << arg_min << "]| = " << min_selected << " is below unselected |x[" << arg_max
           << "]| = " << max_unselected;
  }
  return ::testing::AssertionSuccess();
}

// Upper quantile of the chi-square distribution with `df` degrees of freedom at the standard normal
// quantile z (Wilson-Hilferty). z = 5 is a false-alarm rate of about 3e-7.
inline double chi_square_bound(double df, double z = 5.0) {
  const double a = 2.0 / (9.0 * df);
  const double c = 1.0 - a + z * std::sqrt(a);
  return df * c * c * c;
}

// Chi-square statistic of counts whose expected value is `expected` each with variance `variance`.
inline double chi_square(std::span<const std::size_t> counts, double expected, double variance) {
  double stat = 0.0;
  for (const std::size_t c : counts) {
    const double d = static_cast<double>(c) - expected;
    stat += d * d / variance;
  }
  return stat;
}

// counts[i] = how often item i of a population of counts.size() was picked over `draws` draws of k
// distinct items each, uniformly. Returns a statistic distributed about as chi-square with
// (population - 1) degrees of freedom: the marginal counts have variance draws p (1 - p), p = k / N,
// and the covariance of sampling without replacement scales the sum by N / (N - 1).
inline double sampling_chi_square(std::span<const std::size_t> counts, std::size_t draws, std::size_t k) {
  const double population = static_cast<double>(counts.size());
  const double p = static_cast<double>(k) / population;
  const double expected = static_cast<double>(draws) * p;
  const double variance = static_cast<double>(draws) * p * (1.0 - p) * population / (population - 1.0);
  return chi_square(counts, expected, variance);
}

}  // namespace sparsgd::test
