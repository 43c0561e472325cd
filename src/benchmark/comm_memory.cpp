// The communication benchmark's memory model: what a run allocates, in arrays of n floats and sets
// of k (index, value) pairs, from the aggregators' descriptors (their footprints).

#include <algorithm>
#include <string>

#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::benchmark {
namespace {

// What bench comm allocates, in arrays of n floats (a) and of k (index, value) pairs. The
// coefficients count the buffers of the code paths (gradient, residual, accumulator and top-k
// scratch per worker; a dense sum and ring buffers for the dense aggregators; received and merged
// pairs, P of them for allgather), rounded up, and tests/reliability checks them against the peak
// resident memory of real runs. workers_here: workers in this process (MPI: ranks on this machine,
// each one process, counted together since they share its memory); verifies_here: whether this
// process keeps the results and replays all P workers serially to verify them (rank 0).
// A run's memory by phase: its workers' buffers; then, verifying here, the serial replay, which runs
// after the workers have freed theirs, and the results kept for it from the first exchange on.
struct CommMemory {
  double threads = 0;   // stacks and allocator arenas
  double workers = 0;   // every worker here, together
  double replay = 0;    // 0: no replay here
  double kept = 0;
  std::string workers_part;
};

CommMemory comm_memory(const CommBenchmarkOptions& o, int workers, int workers_here, bool verifies_here) {
  const std::size_t k = k_from_density(o.n, o.exchange.density);
  const double array = 4.0 * static_cast<double>(o.n), p = workers;
  const collectives::AggregatorDescriptor& aggregator = collectives::find_aggregator(o.exchange.aggregator);
  // Drawn selections have no gradient, no residual and no compressor, whose top-k scratch is the
  // fraction above 2 in the sparse aggregators' footprints (2.1-2.2 arrays), and one more set of
  // pairs: the selection.
  collectives::Footprint footprint = aggregator.worker_memory;
  collectives::Footprint reference_footprint = aggregator.reference_memory;
  collectives::Footprint result_footprint = aggregator.result_memory;
  const transport::NetworkSpec network = transport::parse_network(o.exchange.network);
  if (aggregator.properties.delegates && network.enabled()) {
    // auto on a known network holds only the candidates it will try, each with its own buffers
    // (the gradient and residual once; each candidate's footprint already counts the worker's
    // selection, so auto adds no pairs of its own). Each exchange's result is one of theirs, and it
    // is checked against the reference of one of them. (Measured at P = 256, n = 25M, density 0.01,
    // drawn: auto's peak was the sum of its two candidates' runs alone, docs/results/findings.md.)
    footprint = {.arrays = 2.0};
    reference_footprint = {};
    result_footprint = {};
    const collectives::NetworkEstimate estimate{network.alpha_seconds, 1.0 / network.bytes_per_second, true, false};
    const auto larger = [&](collectives::Footprint& held, const collectives::Footprint& other) {
      if (other.bytes(o.n, k, workers) > held.bytes(o.n, k, workers)) held = other;
    };
    for (const collectives::AutoTrial& candidate :
         collectives::plausible_candidates(workers, o.n, k, wire::parse_index_coding(o.exchange.index_coding), estimate)) {
      const collectives::AggregatorDescriptor& d = collectives::find_aggregator(candidate.aggregator);
      footprint.hold_beside(d.worker_memory);
      larger(reference_footprint, d.reference_memory);
      larger(result_footprint, d.result_memory);
    }
  }
  if (o.drawn()) {
    footprint.arrays = std::max(0.0, footprint.arrays - 2.2);
    footprint.pairs += 1.0;
  }
  const double worker = footprint.bytes(o.n, k, workers, o.transport == "mpi");
  const double workers_phase = workers_here * worker + footprint.shared_bytes(o.n);
  const std::string workers_part = std::to_string(workers_here) + (workers_here == 1 ? " worker" : " workers") + " x (" +
                                   (o.drawn() ? "drawn selection, " : "gradient, residual, ") + "buffers)";
  CommMemory memory;
  // A thread's stack and arena as resident, not as reserved (8 MiB of stack each): at P = 1024,
  // n = 100,000 the whole run used 0.86 MiB a worker, its buffers included.
  memory.threads = 32.0 * (1 << 20) + workers_here * 0.5 * (1 << 20);
  memory.workers = workers_phase;
  memory.workers_part = workers_part;
  if (!(o.verify && verifies_here)) return memory;
  // Every iteration's result and every worker's consumed flags (a byte an entry), kept for the replay.
  const double kept = o.iters * (result_footprint.bytes(o.n, k, workers) + p * static_cast<double>(k));
  // The replay holds every worker's residual, one accumulator and the double-precision consumed
  // sum, and runs after the workers have freed their buffers; then the reference aggregation,
  // which is plain (descriptor.hpp's reference_memory).
  const double reference = reference_footprint.bytes(o.n, k, workers);
  // Drawn: the P selections, their consumed entries in double, and the reference.
  memory.replay = o.drawn() ? p * 8.0 * static_cast<double>(k) * 3.0 + reference : (p + 3) * array + reference;
  memory.kept = kept;
  return memory;
}

// With --interleave both runs in one process: the threads once, both runs' workers at once, the two
// replays one after the other, and both runs' kept results.
}  // namespace

MemoryEstimate memory_estimate(const CommBenchmarkOptions& o, int workers, int workers_here, bool verifies_here) {
  CommMemory memory = comm_memory(o, workers, workers_here, verifies_here);
  if (!o.interleave.empty()) {
    const CommMemory other = comm_memory(interleaved_options(o), workers, workers_here, verifies_here);
    memory.workers += other.workers;
    memory.replay = std::max(memory.replay, other.replay);
    memory.kept += other.kept;
    memory.workers_part += ", twice: --aggregator " + o.exchange.aggregator + " and --interleave " + o.interleave;
  }
  MemoryEstimate estimate;
  estimate.add("threads and allocator", memory.threads);
  if (memory.workers >= memory.replay) {
    estimate.add(memory.workers_part, memory.workers);
  } else {
    estimate.add("serial verification of " + std::to_string(workers) + " workers (after them; --no-verify skips it)",
                 memory.replay);
  }
  if (memory.kept > 0) {
    estimate.add("results kept for verification (" + std::to_string(o.iters) + " iterations)", memory.kept);
  }
  return estimate;
}

}  // namespace sparsgd::benchmark
