// Summaries of the series a communication benchmark records, worker by worker and iteration by
// iteration.

#include <algorithm>
#include <functional>

#include "sparsgd/benchmark/comm_benchmark.hpp"

namespace sparsgd::benchmark {
namespace {

// Per iteration, the workers' values folded into one from 0 (each worker's series as long as the first's).
template <typename Fold>
std::vector<double> fold_per_iteration(const std::vector<std::vector<double>>& per_worker, Fold fold) {
  if (per_worker.empty()) return {};
  std::vector<double> per_iteration(per_worker.front().size(), 0.0);
  for (const auto& w : per_worker) {
    for (std::size_t i = 0; i < w.size() && i < per_iteration.size(); ++i) per_iteration[i] = fold(per_iteration[i], w[i]);
  }
  return per_iteration;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

std::vector<double> max_per_iteration(const std::vector<std::vector<double>>& per_worker) {
  return fold_per_iteration(per_worker, [](double a, double b) { return std::max(a, b); });
}

std::vector<double> sum_per_iteration(const std::vector<std::vector<double>>& per_worker) {
  return fold_per_iteration(per_worker, std::plus<>());
}

double median_of_max(const std::vector<std::vector<double>>& per_worker) { return median(max_per_iteration(per_worker)); }

// A worker that is ready early waits for the others; that wait is load imbalance of the
// compression, not communication.
std::vector<double> aggregation_ms(const CommReport& r) {
  const auto ready = max_per_iteration(r.sim_ready_ms);
  const auto summed = max_per_iteration(r.sim_summed_ms);
  std::vector<double> span(ready.size());
  for (std::size_t i = 0; i < span.size(); ++i) span[i] = summed[i] - ready[i];
  return span;
}

// Under SimGrid SMPI with smpi/simulate-computation:no, compression and the residual update take
// no simulated time, so this is the simulated cluster's communication alone.
double median_clock_ms(const CommReport& r) {
  const auto start = max_per_iteration(r.clock_start_s);
  const auto end = max_per_iteration(r.clock_end_s);
  std::vector<double> span(start.size());
  for (std::size_t i = 0; i < span.size(); ++i) span[i] = 1e3 * (end[i] - start[i]);
  return median(span);
}

}  // namespace sparsgd::benchmark
