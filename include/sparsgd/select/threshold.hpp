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
#include <span>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
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

// Tail probability P(|X| > t) for X ~ N(mean, stddev^2), and its inverse in t for a probability p in
// (0, 1]. Exposed for tests of the estimator.
double gaussian_two_sided_tail(double t, double mean, double stddev);
double gaussian_two_sided_threshold(double p, double mean, double stddev);

}  // namespace sparsgd::select
