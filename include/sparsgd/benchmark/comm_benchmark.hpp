#pragma once
// The communication benchmark behind `sparsgd bench comm`: P workers (threads over the local
// transport, or MPI ranks) run compression + aggregation + error feedback on synthetic gradients
// (or the aggregation alone on drawn selections), timed, accounted in bytes, on a simulated
// network if asked, and checked against the serial replay of the same semantics
// (collectives/replay.hpp). The CLI keeps the options' parsing and the printing; a C++ user can run
// the same benchmark from here.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/exchange_options.hpp"
#include "sparsgd/training/memory.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::benchmark {

struct CommBenchmarkOptions {
  std::string transport = "local";  // local (threads in this process) or mpi (one worker per rank)
  int workers = 4;                  // local only
  std::size_t n = 1'000'000;
  collectives::ExchangeOptions exchange;
  std::string model_network = "none";  // closed form only: real networks, or SMPI's simulated one
  int iters = 5;
  std::uint64_t seed = 1;
  int timeout_ms = 60'000;
  bool verify = true;
  // dense: the library's ring over point-to-point messages even where the transport has its own
  // allreduce (MPI).
  bool ring_allreduce = false;
  // gradient: every worker compresses its synthetic gradient with error feedback (the trainer's
  // exchange); drawn: every worker draws k entries (draw_selection) and only the aggregation runs,
  // so memory grows with P k instead of P n (P = 256 at n = 25M, SimGrid runs of 1024 ranks).
  std::string selections = "gradient";
  // Another aggregator run in the same process on the same workers, its exchanges alternating with
  // the first's (empty: none). Two separate runs differ by more than the 5% a comparison of auto
  // with a fixed aggregator asks for (memory layout, the machine's state minutes apart); interleaved,
  // both see the same process and machine, and each iteration alternates which goes first.
  std::string interleave;
  bool drawn() const { return selections == "drawn"; }
};

// Throws InvalidArgument naming the first bad option (flags as the CLI names them).
void validate(const CommBenchmarkOptions& options);

// The interleaved run's options: the same, with the other aggregator.
CommBenchmarkOptions interleaved_options(const CommBenchmarkOptions& options);

// The exchange every worker runs, and the serial replay replays.
collectives::ExchangeConfig exchange_config(const CommBenchmarkOptions& options);

// What the workers of one run measured, gathered, and how the verification ended.
struct CommReport {
  std::vector<std::vector<double>> wall_ms, sim_ms, sim_ready_ms, sim_summed_ms;  // [worker][iteration]
  std::vector<std::vector<double>> agg_ms, agg_cpu_ms, compress_ms;                // [worker][iteration]
  std::vector<std::vector<double>> agg_minor_faults;                               // [worker][iteration]; drawn only
  std::vector<std::vector<double>> clock_start_s, clock_end_s;                     // [worker][iteration]
  bool global_clock = false;  // the transport's clock is the same for every worker
  std::vector<transport::TrafficCounters> counters;
  bool matches = true;
  double conservation_rel_error = 0.0;
  std::string first_mismatch;
  MemoryUse memory;
  std::optional<collectives::AutoDecision> auto_decision;  // rank 0's
};

// Throws Error where a verified run did not match its reference or lost gradient mass.
void check_verified(const CommBenchmarkOptions& options, const CommReport& report);

// Summaries of a report's series.
double median(std::vector<double> values);
std::vector<double> max_per_iteration(const std::vector<std::vector<double>>& per_worker);  // the slowest worker's
std::vector<double> sum_per_iteration(const std::vector<std::vector<double>>& per_worker);
double median_of_max(const std::vector<std::vector<double>>& per_worker);
// The simulated aggregation of each synchronous step: from the moment the last worker has its
// selection until the last worker holds the sum.
std::vector<double> aggregation_ms(const CommReport& report);
// The aggregation on the transport's clock (median over iterations): from the last worker starting
// it to the last one holding the sum.
double median_clock_ms(const CommReport& report);

// What a run allocates, by part: its workers' buffers (workers_here of them in this process), and
// where this process verifies (verifies_here), the serial replay and the results kept for it; with
// --interleave both runs. tests/reliability checks it against the peak resident memory of real runs.
MemoryEstimate memory_estimate(const CommBenchmarkOptions& options, int workers, int workers_here, bool verifies_here);

// Runs options.workers workers as threads of this process: the run's report, and with interleave
// the interleaved run's after it. `estimate`: what memory_estimate said, for the reports.
std::vector<CommReport> run_local(const CommBenchmarkOptions& options, const MemoryEstimate& estimate);

// One MPI rank's part of the run (every rank calls it): rank 0 gathers every rank's record, verifies
// them against one serial replay and returns the report; the other ranks return nothing.
std::optional<CommReport> run_rank(transport::Transport& t, const CommBenchmarkOptions& options,
                                   const MemoryEstimate& estimate);

}  // namespace sparsgd::benchmark
