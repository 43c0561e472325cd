#pragma once
// One worker's side of the communication benchmark: what it measures and keeps, and its loop.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::benchmark {

// What one worker measured and produced.
struct WorkerRecord {
  // Per iteration; the sim_* times are on the virtual clock, relative to the iteration's start
  // (the moment the slowest worker had its gradient).
  std::vector<double> wall_ms;
  // Wall clock of the aggregation alone: from a barrier after compression until this worker holds
  // the sum (the slowest worker's value is the aggregation time of the step); also its thread CPU
  // time, and the compression's wall time.
  std::vector<double> agg_ms, agg_cpu_ms, compress_ms;
  // --selections drawn: the minor page faults this worker's thread took in the aggregation. At
  // P = 256 on 2 cores, fault handling is CPU time that the simulated clock charges, so it says
  // whether a slow exchange paid for memory the allocator had given back (empty otherwise).
  std::vector<double> agg_minor_faults;
  std::vector<double> sim_ms;          // done, residual updated
  std::vector<double> sim_ready_ms;    // selection ready, aggregation starts
  std::vector<double> sim_summed_ms;   // aggregation done
  // Absolute times on the transport's clock (MPI_Wtime under MPI: the simulated clock under SMPI).
  std::vector<double> clock_start_s;   // aggregation starts (after the barriers)
  std::vector<double> clock_end_s;     // aggregation done
  std::vector<std::vector<std::uint8_t>> consumed;    // per iteration
  // Kept in full only where `keep_results` (worker 0, in-process and under MPI); the other
  // workers keep digests, which must equal the kept worker's (every rank gets the same sum).
  bool keep_results = false;
  std::vector<collectives::Aggregation> results;      // per iteration
  std::vector<std::uint64_t> sum_digests;             // per iteration
  transport::TrafficCounters counters;
  std::uint64_t residual_digest = 0;                  // after the last iteration
  std::optional<collectives::AutoDecision> auto_decision;  // auto: its network and last choice
};

// One aggregator's run on a worker, with what it measured: a benchmark runs one, or two with
// --interleave, on the same transport and the same gradients or drawn selections.
struct Pipeline {
  const CommBenchmarkOptions* options;
  WorkerRecord* record;
};

// A worker's whole run: every pipeline on one transport (`base`, wrapped in the simulated network
// where `network` has a bandwidth), each with its own aggregator and, for gradients, its own
// compressor and residual.
void run_worker(const std::vector<Pipeline>& pipelines, const transport::NetworkSpec& network, transport::Transport& base);

// The workers whose records rank 0 checks, by rank.
using CheckedWorkers = std::vector<std::pair<int, const WorkerRecord*>>;

// Replays all P workers serially and compares the checked ones: sums, consumed entries, final
// residuals (bitwise, by digest), and conservation of gradient mass at the last iteration; the
// result goes into the report's matches, first_mismatch and conservation_rel_error.
void verify(const CommBenchmarkOptions& options, int workers, const CheckedWorkers& checked, CommReport& report);

}  // namespace sparsgd::benchmark
