#include "sparsgd/select/threshold.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::select {
namespace {

std::uint32_t gaussian_initial_key(std::span<const float> x, std::size_t k) {
  const Moments m = moments(x);
  if (!m.finite) check_finite(x, "input to threshold selection");
  return gaussian_pivot(m, x.size(), k);
}

// DGC's estimate: the magnitude that the top density fraction of a strided sample exceeds.
std::uint32_t sampled_initial_key(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& keys) {
  const std::size_t n = x.size();
  const SampleLayout layout = sample_layout(n, k);
  keys.clear();
  if (layout.whole) {
    for (const float v : x) keys.push_back(magnitude_key(v));
  } else {
    for (std::size_t r = 0; r < layout.runs; ++r) {
      const std::size_t start = r * layout.stride + layout.offset;
      for (std::size_t j = 0; j < kSampleRunLength && start + j < n; ++j) keys.push_back(magnitude_key(x[start + j]));
    }
  }
  const std::size_t rank = sample_pivot_rank(keys.size(), n, k);
  if (rank >= keys.size()) return 0;
  auto nth = keys.begin() + static_cast<std::ptrdiff_t>(rank);  // the first one that does not pass
  std::nth_element(keys.begin(), nth, keys.end(), std::greater<>());
  return *nth;
}

// Standard normal two-sided inverse: the z with P(|Z| > z) = p.
double standard_z(double p) { return gaussian_two_sided_threshold(p, 0.0, 1.0); }

// What is known about the pivot: keys that passed too many (low) and too few (high) entries, with
// those counts.
struct Bracket {
  std::uint32_t low = 0;
  std::size_t low_count = 0;
  bool low_known = false;
  std::uint32_t high = kNonFiniteKey;
  std::size_t high_count = 0;
  // The observation before the last one with a non-zero count, for a secant in log-log space.
  std::uint32_t previous_pivot = 0;
  std::size_t previous_count = 0;
};

// Next pivot from the count at the last one. With two observations, a secant of log(count)
// against log(threshold): exact for power-law tails (heavy-tailed gradients) and quick for
// Gaussian ones. With one, fit a zero-mean Gaussian whose tail matches the count. If the guess
// leaves the bracket, interpolate the count linearly between the bracket's ends; failing that,
// bisect the keys. The result lies strictly inside the bracket.
std::uint32_t corrected_key(std::uint32_t pivot, std::size_t count, std::size_t n, std::size_t k, const Bracket& b) {
  const std::uint32_t lowest = b.low_known ? b.low + 1 : 0;
  auto inside = [&](double magnitude) -> std::optional<std::uint32_t> {
    if (!(magnitude >= 0.0) || !std::isfinite(magnitude)) return std::nullopt;
    const std::uint32_t key = magnitude_key(static_cast<float>(magnitude));
    if (key >= lowest && key < b.high) return key;
    return std::nullopt;
  };
  const double t = key_to_magnitude(pivot);
  double model = -1.0;
  if (b.previous_count > 0 && count > 0 && b.previous_count != count && b.previous_pivot != pivot && t > 0.0 &&
      key_to_magnitude(b.previous_pivot) > 0.0) {
    const double lt1 = std::log(key_to_magnitude(b.previous_pivot)), lt2 = std::log(t);
    const double lc1 = std::log(static_cast<double>(b.previous_count)), lc2 = std::log(static_cast<double>(count));
    model = std::exp(lt2 + (std::log(static_cast<double>(k)) - lc2) * (lt2 - lt1) / (lc2 - lc1));
    if (const auto key = inside(model)) return *key;
    model = -1.0;
  }
  if (count == 0) {
    model = t / 4.0;
  } else if (count >= n) {
    model = t * 4.0;
  } else if (t > 0.0) {
    const double z_observed = standard_z(static_cast<double>(count) / static_cast<double>(n));
    const double z_target = standard_z(static_cast<double>(k) / static_cast<double>(n));
    if (z_observed > 0.0) model = t * z_target / z_observed;
  }
  if (const auto key = inside(model)) return *key;
  if (b.low_known && b.high < kNonFiniteKey && b.low_count > b.high_count) {
    const double lo = key_to_magnitude(b.low), hi = key_to_magnitude(b.high);
    const double fraction = (static_cast<double>(b.low_count) - static_cast<double>(k)) /
                            (static_cast<double>(b.low_count) - static_cast<double>(b.high_count));
    if (const auto key = inside(lo + (hi - lo) * fraction)) return *key;
  }
  return lowest + (b.high - lowest) / 2;
}

}  // namespace

std::size_t threshold_min_count(std::size_t k) {
  return static_cast<std::size_t>(std::ceil(0.8 * static_cast<double>(k)));
}

std::size_t threshold_max_count(std::size_t k) {
  return std::max(threshold_min_count(k), static_cast<std::size_t>(std::floor(1.25 * static_cast<double>(k))));
}

double gaussian_two_sided_tail(double t, double mean, double stddev) {
  if (stddev <= 0.0) return std::abs(mean) > t ? 1.0 : 0.0;
  const double scale = stddev * std::sqrt(2.0);
  return 0.5 * std::erfc((t - mean) / scale) + 0.5 * std::erfc((t + mean) / scale);
}

double gaussian_two_sided_threshold(double p, double mean, double stddev) {
  if (stddev <= 0.0) return std::abs(mean);
  // The tail falls monotonically in t >= 0, so bisection converges to double precision.
  double lo = 0.0;
  double hi = std::abs(mean) + 40.0 * stddev;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (gaussian_two_sided_tail(mid, mean, stddev) > p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

std::uint32_t gaussian_pivot(const Moments& moments, std::size_t n, std::size_t k) {
  const double p = static_cast<double>(k) / static_cast<double>(n);
  return magnitude_key(static_cast<float>(gaussian_two_sided_threshold(p, moments.mean, moments.stddev)));
}

SampleLayout sample_layout(std::size_t n, std::size_t k) {
  const double density = static_cast<double>(k) / static_cast<double>(n);
  // 1% of the data as in DGC, but enough that at least 16 sampled entries pass.
  const auto sample = static_cast<std::size_t>(std::max(0.01 * static_cast<double>(n), 16.0 / density));
  if (sample * 2 >= n) return {.whole = true};
  const std::size_t runs = std::max<std::size_t>(1, sample / kSampleRunLength);
  const std::size_t stride = n / runs;
  return {.runs = runs, .stride = stride, .offset = (stride - std::min(stride, kSampleRunLength)) / 2};
}

std::size_t sample_pivot_rank(std::size_t sample_size, std::size_t n, std::size_t k) {
  const double density = static_cast<double>(k) / static_cast<double>(n);
  return static_cast<std::size_t>(std::llround(density * static_cast<double>(sample_size)));
}

std::optional<std::uint32_t> search_pivot(std::size_t n, std::size_t k, std::uint32_t initial,
                                          const std::function<PivotCount(std::uint32_t)>& count_at, int& passes) {
  const std::size_t min_count = threshold_min_count(k);
  const std::size_t max_count = threshold_max_count(k);
  std::uint32_t pivot = initial;
  Bracket bracket;
  for (int attempt = 0; attempt <= kThresholdMaxCorrections; ++attempt) {
    const PivotCount counts = count_at(pivot);
    ++passes;
    if (counts.max_key + 1 < bracket.high) {  // max_key itself passes nobody
      bracket.high = counts.max_key + 1;
      bracket.high_count = 0;
    }
    if (counts.greater >= min_count && counts.greater <= max_count) return pivot;
    if (counts.greater > max_count) {
      if (!bracket.low_known || pivot > bracket.low) {
        bracket.low = pivot;
        bracket.low_count = counts.greater;
        bracket.low_known = true;
      }
    } else if (pivot < bracket.high) {
      bracket.high = pivot;
      bracket.high_count = counts.greater;
    }
    // No untried key is left between the bracket: ties decide the count, not the pivot.
    const std::uint32_t lowest_untried = bracket.low_known ? bracket.low + 1 : 0;
    if (bracket.high <= lowest_untried) break;
    const std::uint32_t next = corrected_key(pivot, counts.greater, n, k, bracket);
    if (counts.greater > 0) {
      bracket.previous_pivot = pivot;
      bracket.previous_count = counts.greater;
    }
    pivot = next;
  }
  return std::nullopt;
}

ReusedThreshold::ReusedThreshold(std::uint64_t period) : period_(period) {
  if (period_ == 0) throw InvalidArgument("the threshold period of topk-reuse must be at least 1");
}

bool ReusedThreshold::exact_due(std::uint64_t iteration, std::size_t n, std::size_t k) const {
  return !has_pivot_ || iteration % period_ == 0 || n != n_ || k != k_;
}

void ReusedThreshold::keep(std::optional<std::uint32_t> kth, std::size_t n, std::size_t k) {
  has_pivot_ = kth.has_value();
  if (!kth) return;
  // The filter keeps keys above the pivot: the k-th magnitude and everything larger.
  pivot_ = *kth > 0 ? *kth - 1 : 0;
  n_ = n;
  k_ = k;
}

ThresholdResult threshold_select(std::span<const float> x, std::size_t k, ThresholdEstimator estimator,
                                 SparseVector& out, ThresholdWorkspace& workspace) {
  const std::size_t n = x.size();
  validate_k(n, k);
  out.dim = n;
  ThresholdResult result;
  if (n == 0) {
    out.resize(0);
    return result;
  }
  const std::size_t max_count = threshold_max_count(k);
  const std::uint32_t initial = estimator == ThresholdEstimator::gaussian
                                    ? gaussian_initial_key(x, k)
                                    : sampled_initial_key(x, k, workspace.sample_keys);
  out.resize(max_count + filter_padding());
  // Each pass stores what passes while it fits, so the pass that ends the search leaves the answer.
  FilterCounts last;
  const auto count_at = [&](std::uint32_t pivot) {
    last = filter_greater(x, pivot, out.indices.data(), out.values.data(), max_count);
    if (last.max_key >= kNonFiniteKey) check_finite(x, "input to threshold selection");
    return PivotCount{last.greater, last.max_key};
  };
  if (const auto pivot = search_pivot(n, k, initial, count_at, result.passes)) {
    out.resize(last.greater);
    result.count = last.greater;
    result.threshold = key_to_magnitude(*pivot);
    return result;
  }
  result.exact_fallback = true;
  result.count = k;
  result.threshold = 0.0f;
  topk(x, k, out, workspace.topk);
  return result;
}

}  // namespace sparsgd::select
