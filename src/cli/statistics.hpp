#pragma once
// Summaries of repeated timings for the benchmark commands.

#include <algorithm>
#include <vector>

namespace sparsgd::cli {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace sparsgd::cli
