#pragma once
// Threshold selection: estimate the magnitude that about k entries exceed, keep what passes in one
// filter pass, and correct the estimate when the count misses.
//
// Guarantee: the number of entries returned always lies in [ceil(0.8 k), max(that, floor(1.25 k))].
// Up to kThresholdMaxCorrections corrected passes are tried; if the count still misses (data the
// estimate cannot describe, such as many equal magnitudes), the exact top-k is returned instead,
// and ThresholdResult::exact_fallback says so. Entries are in ascending index order.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::select {

enum class ThresholdEstimator {
  gaussian,  // mean and standard deviation of x: the Gaussian tail that holds density of the mass
  sampled,   // DGC: the top density fraction of a strided sample of x
};

inline constexpr int kThresholdMaxCorrections = 3;

struct ThresholdResult {
  std::size_t count = 0;        // entries returned
  float threshold = 0.0f;       // magnitude that was exceeded (of the last filter pass)
  int passes = 0;               // filter passes over x
  bool exact_fallback = false;  // the corrections missed and the exact top-k was used
};

// Count bounds of the guarantee above, for a target k >= 1.
std::size_t threshold_min_count(std::size_t k);
std::size_t threshold_max_count(std::size_t k);

struct ThresholdWorkspace {
  TopkWorkspace topk;
  std::vector<std::uint32_t> sample_keys;
};

// Resizes `out` to the selected entries. Throws InvalidArgument on a bad k, InvalidData on NaN/Inf.
ThresholdResult threshold_select(std::span<const float> x, std::size_t k, ThresholdEstimator estimator,
                                 SparseVector& out, ThresholdWorkspace& workspace);

// The parts of threshold_select that never read x, so that a selection over data elsewhere (a GPU,
// torch/device_selection.hpp) tries the same pivots and ends at the same one.

// The Gaussian estimate's first pivot from x's moments.
std::uint32_t gaussian_pivot(const Moments& moments, std::size_t n, std::size_t k);

// DGC's strided sample: `runs` runs of up to kSampleRunLength consecutive entries, run r starting at
// r * stride + offset (entries past n left out); whole: every entry instead.
inline constexpr std::size_t kSampleRunLength = 16;
struct SampleLayout {
  bool whole = false;
  std::size_t runs = 0;
  std::size_t stride = 0;
  std::size_t offset = 0;
};
SampleLayout sample_layout(std::size_t n, std::size_t k);
// How many sampled keys pass DGC's first pivot: the pivot is the sample's (rank+1)-th largest key,
// or 0 where rank >= the sample's size.
std::size_t sample_pivot_rank(std::size_t sample_size, std::size_t n, std::size_t k);

// One filter pass's answer at a pivot: entries with a key above it, and the largest key seen (a key
// >= kNonFiniteKey means x holds NaN or Inf: count_at should throw instead of returning it).
struct PivotCount {
  std::size_t greater = 0;
  std::uint32_t max_key = 0;
};
// The corrected search from `initial`: calls count_at for each pivot tried (at most
// kThresholdMaxCorrections + 1) and returns the first whose count lies within the bounds, or nothing
// where the corrections missed (the exact top-k is then the answer). `passes` counts the calls.
std::optional<std::uint32_t> search_pivot(std::size_t n, std::size_t k, std::uint32_t initial,
                                          const std::function<PivotCount(std::uint32_t)>& count_at, int& passes);

// Ok-Topk's reused threshold (topk-reuse): an exact top-k is due at iterations that are multiples of
// the period, at the first call and where n or k changed; between, the kept pivot is filtered
// against and the count must lie within the bounds above, or the exact top-k runs after all.
class ReusedThreshold {
 public:
  explicit ReusedThreshold(std::uint64_t period);  // throws InvalidArgument for a period of 0
  bool exact_due(std::uint64_t iteration, std::size_t n, std::size_t k) const;
  std::uint32_t pivot() const { return pivot_; }
  // After an exact top-k of `k` entries of n whose smallest magnitude key was `kth` (or none: k == 0).
  void keep(std::optional<std::uint32_t> kth, std::size_t n, std::size_t k);

 private:
  std::uint64_t period_;
  bool has_pivot_ = false;
  std::uint32_t pivot_ = 0;
  std::size_t n_ = 0, k_ = 0;
};

// Tail probability P(|X| > t) for X ~ N(mean, stddev^2), and its inverse in t for a probability p in
// (0, 1]. Exposed for tests of the estimator.
double gaussian_two_sided_tail(double t, double mean, double stddev);
double gaussian_two_sided_threshold(double p, double mean, double stddev);

}  // namespace sparsgd::select
