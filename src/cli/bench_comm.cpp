// `sparsgd bench comm`: compression + aggregation + error feedback on P workers (threads over the
// local transport, or MPI ranks), timed, accounted in bytes, run on a simulated network if asked,
// and checked against the serial reference of the same semantics.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/auto_help.hpp"
#include "cli/commands.hpp"
#include "cli/memory_report.hpp"
#include "cli/mpi_job.hpp"
#include "cli/statistics.hpp"
#include "cli/validators.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/replay.hpp"
#include "sparsgd/collectives/selection_replay.hpp"
#include "sparsgd/collectives/agreement.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/hash.hpp"
#include "sparsgd/core/memory.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/sim/cost_model.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"
#include "sparsgd/transport/wrapper.hpp"

namespace sparsgd::cli {
namespace {

struct CommOptions {
  std::string transport = "local";
  int workers = 4;
  std::size_t n = 1'000'000;
  double density = 0.001;
  std::string compressor = "topk";
  std::string aggregator = "gtopk";
  std::string network = "none";
  std::string model_network = "none";  // closed form only: real networks, or SMPI's simulated one
  double r_factor = 4.0;
  std::uint64_t threshold_period = 32;
  bool error_feedback = true;
  std::string index_coding = "raw";
  int auto_trials = 2;
  int iters = 5;
  std::uint64_t seed = 1;
  int timeout_ms = 60'000;
  bool verify = true;
  bool json = false;
  bool ring_allreduce = false;
  // gradient: every worker compresses its synthetic gradient with error feedback (the trainer's
  // exchange); drawn: every worker draws k entries (draw_selection) and only the aggregation runs,
  // so memory grows with P k instead of P n (P = 256 at n = 25M, SimGrid runs of 1024 ranks).
  std::string selections = "gradient";
  // Another aggregator run in the same process on the same workers, its exchanges alternating with
  // --aggregator's (empty: none). Two separate runs differ by more than the 5% a comparison of auto
  // with a fixed aggregator asks for (memory layout, the machine's state minutes apart); interleaved,
  // both see the same process and machine, and each iteration alternates which goes first.
  std::string interleave;
  bool drawn() const { return selections == "drawn"; }
};

// --interleave's run: the same options but its aggregator.
CommOptions interleaved_options(const CommOptions& o) {
  CommOptions partner = o;
  partner.aggregator = o.interleave;
  partner.interleave.clear();
  return partner;
}

// Forwards everything but the transport's own allreduce, so that dense runs the library's ring over
// point-to-point messages (what the closed form describes) also without a simulated network.
class PointToPointOnly final : public transport::TransportWrapper {
 public:
  using TransportWrapper::TransportWrapper;
  void barrier() override {
    inner_.set_timeout(timeout());
    inner_.barrier();
  }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override {
    inner_.set_timeout(timeout());
    inner_.send(peer, tag, data);
  }
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override {
    inner_.set_timeout(timeout());
    return inner_.recv(peer, tag, buffer, max_bytes);
  }
  std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                          std::vector<std::byte>& buffer, std::size_t max_bytes,
                          const transport::InFlightWork& while_in_flight) override {
    inner_.set_timeout(timeout());
    return inner_.sendrecv(send_peer, send_tag, data, recv_peer, recv_tag, buffer, max_bytes, while_in_flight);
  }
};

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
  std::optional<collectives::AutoDecision> auto_decision;  // --aggregator auto: its network and last choice
};

std::uint64_t digest_of(const std::vector<float>& dense) { return fnv1a(std::as_bytes(std::span(dense))); }

std::uint64_t digest_of(const collectives::Aggregation& a) {
  if (a.dense) return digest_of(a.dense_sum);
  return fnv1a(std::as_bytes(std::span(a.sum.values)), fnv1a(std::as_bytes(std::span(a.sum.indices))));
}


// Whether MPI_Wtime is one clock for all ranks: under SimGrid SMPI it is the simulator's; on a
// real cluster every machine has its own, so spans between ranks mean nothing there.
#ifdef SPARSGD_SMPI
constexpr bool kGlobalMpiClock = true;
#else
constexpr bool kGlobalMpiClock = false;
#endif

// Max of one double over all ranks, through rank 0 (only for clock alignment and reports).
double max_over_ranks(transport::Transport& t, double value, int tag) {
  std::vector<std::byte> buffer;
  if (t.rank() == 0) {
    for (int r = 1; r < t.size(); ++r) {
      double v = 0.0;
      if (t.recv(r, tag, buffer, sizeof v) != sizeof v) throw transport::TransportError("bad clock message");
      std::memcpy(&v, buffer.data(), sizeof v);
      value = std::max(value, v);
    }
    for (int r = 1; r < t.size(); ++r) t.send(r, tag + 1, std::as_bytes(std::span(&value, 1)));
  } else {
    t.send(0, tag, std::as_bytes(std::span(&value, 1)));
    if (t.recv(0, tag + 1, buffer, sizeof value) != sizeof value) throw transport::TransportError("bad clock message");
    std::memcpy(&value, buffer.data(), sizeof value);
  }
  return value;
}

collectives::ExchangeConfig exchange_config(const CommOptions& o) {
  collectives::ExchangeConfig config;
  config.compressor.name = o.compressor;
  config.compressor.r_factor = o.r_factor;
  config.compressor.threshold_period = o.threshold_period;
  // auto chooses for the simulated network where there is one, else measures the real one.
  const transport::NetworkSpec network = transport::parse_network(o.network);
  if (network.enabled()) config.network = {network.alpha_seconds, 1.0 / network.bytes_per_second, true, false};
  // Drawn selections of an aggregator whose workers must share indices are what random-k with a
  // shared seed selects (draw_selection shares them too): validated as that.
  if (o.drawn() && collectives::find_aggregator(o.aggregator).properties.needs_shared_indices) {
    config.compressor.name = "randk";
  }
  config.compressor.seed = o.seed;
  config.compressor.shared_seed = collectives::find_aggregator(o.aggregator).properties.needs_shared_indices;
  config.aggregator = o.aggregator;
  config.density = o.density;
  config.error_feedback = o.error_feedback;
  config.index_coding = wire::parse_index_coding(o.index_coding);
  config.auto_trial_rounds = o.auto_trials;
  config.barrier_before_aggregation = true;  // so that the aggregation is timed alone
  return config;
}

// RUSAGE_THREAD: the calling thread's own faults, where a worker is a thread (local) or a process.
// NaN where the kernel will not say (the JSON then shows null, not a count of zero).
double thread_minor_faults() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(usage.ru_minflt);
}

// Adds what the transport counted between `before` and `after` to `total`: where two aggregators
// share a transport (--interleave), each gets only its own exchanges' traffic.
void add_traffic(transport::TrafficCounters& total, const transport::TrafficCounters& before,
                 const transport::TrafficCounters& after) {
  total.bytes_sent += after.bytes_sent - before.bytes_sent;
  total.bytes_received += after.bytes_received - before.bytes_received;
  total.messages_sent += after.messages_sent - before.messages_sent;
  total.messages_received += after.messages_received - before.messages_received;
}

// One aggregator's run on a worker, with what it measured: bench comm runs one, or two with
// --interleave, on the same transport and the same gradients or drawn selections.
struct Pipeline {
  const CommOptions* options;
  WorkerRecord* record;
};

// Which pipeline runs `turn`-th in iteration `it`: in turn, the first alternating, so that neither
// always runs right after the gradient is made or right after the other.
std::size_t pipeline_at(std::size_t turn, int it, std::size_t pipelines) {
  return (turn + static_cast<std::size_t>(it)) % pipelines;
}

// Every iteration starts when the slowest worker is ready, as in synchronous SGD: the virtual
// clocks are set to their maximum; returns the start.
double align_iteration_start(transport::Transport& base, transport::SimulatedNetwork& simulated) {
  simulated.now();
  simulated.set_clock(max_over_ranks(base, simulated.now(), 900));
  return simulated.now();
}

// What the verification needs of one iteration's result.
void keep_for_verification(const CommOptions& o, const collectives::Aggregation& result, WorkerRecord& record) {
  if (!o.verify) return;
  record.consumed.push_back(result.consumed);
  record.sum_digests.push_back(digest_of(result));
  if (record.keep_results) record.results.push_back(result);
}

bool drawn_indices_shared(const CommOptions& o) {
  return collectives::find_aggregator(o.aggregator).properties.needs_shared_indices;
}

// One drawn exchange of one pipeline: the aggregation alone, timed as the exchange times it (two
// barriers, then from the transport's clock at the start to its end).
void run_drawn_exchange(const CommOptions& o, transport::Transport& base, transport::Transport& comm,
                        transport::SimulatedNetwork* simulated, collectives::Aggregator& aggregator,
                        const SparseVector& selection, std::size_t k, collectives::Aggregation& result,
                        WorkerRecord& record) {
  const transport::TrafficCounters traffic_before = comm.counters();
  base.barrier();
  const double sim_start = simulated != nullptr ? align_iteration_start(base, *simulated) : 0.0;
  const auto wall_start = std::chrono::steady_clock::now();
  comm.barrier();
  comm.barrier();
  const double sim_ready = simulated != nullptr ? simulated->now() : 0.0;
  const auto aggregate_start = std::chrono::steady_clock::now();
  const double faults_start = thread_minor_faults();
  const double cpu_start = transport::thread_cpu_seconds();
  record.clock_start_s.push_back(comm.clock_seconds());
  aggregator.aggregate(comm, selection, k, result);
  record.clock_end_s.push_back(comm.clock_seconds());
  record.agg_cpu_ms.push_back(1e3 * (transport::thread_cpu_seconds() - cpu_start));
  record.agg_minor_faults.push_back(thread_minor_faults() - faults_start);
  const auto wall_end = std::chrono::steady_clock::now();
  record.agg_ms.push_back(std::chrono::duration<double, std::milli>(wall_end - aggregate_start).count());
  record.wall_ms.push_back(std::chrono::duration<double, std::milli>(wall_end - wall_start).count());
  record.compress_ms.push_back(0.0);
  if (simulated != nullptr) {
    const double sim_end = simulated->now();
    record.sim_ms.push_back(1e3 * (sim_end - sim_start));
    record.sim_ready_ms.push_back(1e3 * (sim_ready - sim_start));
    record.sim_summed_ms.push_back(1e3 * (sim_end - sim_start));
  }
  keep_for_verification(o, result, record);
  add_traffic(record.counters, traffic_before, comm.counters());
  base.barrier();  // as in run_worker: the next draw must not run beside another's aggregation
}

// --selections drawn: the aggregation alone, on selections drawn anew each iteration, timed as the
// exchange times it (two barriers, then from the transport's clock at the start to its end).
void run_drawn_worker(const std::vector<Pipeline>& pipelines, transport::Transport& base, transport::Transport& comm,
                      transport::SimulatedNetwork* simulated) {
  std::vector<std::unique_ptr<collectives::Aggregator>> aggregators;
  for (const Pipeline& pipeline : pipelines) {
    const collectives::ExchangeConfig config = exchange_config(*pipeline.options);
    aggregators.push_back(collectives::make_aggregator(
        pipeline.options->aggregator, {config.index_coding, config.network, config.auto_trial_rounds}));
  }
  const CommOptions& o = *pipelines.front().options;
  const std::size_t k = k_from_density(o.n, o.density);
  SparseVector selection;
  // What `selection` holds: -1 nothing of this iteration, else this iteration's draw with indices
  // shared (1) or not (0); pipelines that draw alike share one draw.
  int drawn_kind = -1;
  collectives::Aggregation result;
  for (int it = 0; it < o.iters; ++it) {
    drawn_kind = -1;
    for (std::size_t turn = 0; turn < pipelines.size(); ++turn) {
      const std::size_t p = pipeline_at(turn, it, pipelines.size());
      collectives::Aggregator& aggregator = *aggregators[p];
      WorkerRecord& record = *pipelines[p].record;
      const bool shared = drawn_indices_shared(*pipelines[p].options);
      if (drawn_kind != static_cast<int>(shared)) {
        draw_selection(selection, o.n, k, o.seed, base.rank(), static_cast<std::uint64_t>(it), shared);
        drawn_kind = static_cast<int>(shared);
      }
      run_drawn_exchange(*pipelines[p].options, base, comm, simulated, aggregator, selection, k, result, record);
    }
  }
  for (std::size_t p = 0; p < pipelines.size(); ++p) {
    if (const collectives::AutoDecision* d = collectives::auto_decision(*aggregators[p])) {
      pipelines[p].record->auto_decision = *d;
    }
  }
}

// One gradient exchange of one pipeline: compression, aggregation and the residual update, on the
// gradient this worker made for the iteration.
void run_gradient_exchange(const CommOptions& o, int it, std::span<const float> gradient, transport::Transport& base,
                           transport::Transport& comm, transport::SimulatedNetwork* simulated,
                           collectives::GradientExchange& exchange, WorkerRecord& record) {
  const transport::TrafficCounters traffic_before = comm.counters();
  base.barrier();
  const double sim_start = simulated != nullptr ? align_iteration_start(base, *simulated) : 0.0;
  const auto wall_start = std::chrono::steady_clock::now();
  const collectives::Aggregation& result = exchange.exchange(gradient, static_cast<std::uint64_t>(it));
  const auto wall_end = std::chrono::steady_clock::now();
  record.wall_ms.push_back(std::chrono::duration<double, std::milli>(wall_end - wall_start).count());
  const auto& phase = exchange.last_times();
  record.clock_start_s.push_back(phase.aggregate_clock_start);
  record.clock_end_s.push_back(phase.aggregate_clock_end);
  record.agg_ms.push_back(1e3 * phase.aggregate_seconds);
  record.agg_cpu_ms.push_back(1e3 * phase.aggregate_cpu_seconds);
  record.compress_ms.push_back(1e3 * phase.compress_seconds);
  if (simulated != nullptr) {
    const double sim_end = simulated->now();
    // The compute before the aggregation (compression) and after it (the residual update) is
    // charged on the clock as measured CPU time, so the aggregation's start and end are exact.
    record.sim_ms.push_back(1e3 * (sim_end - sim_start));
    record.sim_ready_ms.push_back(1e3 * phase.compress_cpu_seconds);
    record.sim_summed_ms.push_back(1e3 * (sim_end - sim_start - phase.feedback_cpu_seconds));
  }
  keep_for_verification(o, result, record);
  add_traffic(record.counters, traffic_before, comm.counters());
  // The next iteration's gradient and compression must not start beside another worker's
  // aggregation: where workers share cores (threads here, ranks on one machine), a worker done
  // early would take cores and caches from those still aggregating, and their times would
  // measure that (at P = 4 on 2 cores the aggregation's wall time doubled).
  base.barrier();
}

// A worker's whole run: every pipeline (one, or two with --interleave) on one transport, each
// with its own aggregator and, for gradients, its own compressor and residual.
void run_worker(const std::vector<Pipeline>& pipelines, const transport::NetworkSpec& network,
                transport::Transport& base) {
  const CommOptions& o = *pipelines.front().options;
  std::optional<transport::SimulatedNetwork> simulated;
  std::optional<PointToPointOnly> point_to_point;
  if (network.enabled()) {
    simulated.emplace(base, network);
  } else if (o.ring_allreduce) {
    point_to_point.emplace(base);
    point_to_point->set_timeout(base.timeout());
  }
  transport::Transport& comm = simulated       ? static_cast<transport::Transport&>(*simulated)
                               : point_to_point ? static_cast<transport::Transport&>(*point_to_point)
                                                : base;
  if (o.drawn()) {
    run_drawn_worker(pipelines, base, comm, simulated ? &*simulated : nullptr);
    return;
  }
  std::vector<std::unique_ptr<collectives::GradientExchange>> exchanges;
  for (const Pipeline& pipeline : pipelines) {
    exchanges.push_back(std::make_unique<collectives::GradientExchange>(comm, o.n, exchange_config(*pipeline.options)));
  }
  std::vector<float> gradient(o.n);
  for (int it = 0; it < o.iters; ++it) {
    fill_gradient(gradient, o.seed, base.rank(), static_cast<std::uint64_t>(it));
    for (std::size_t turn = 0; turn < pipelines.size(); ++turn) {
      const std::size_t p = pipeline_at(turn, it, pipelines.size());
      run_gradient_exchange(*pipelines[p].options, it, gradient, base, comm, simulated ? &*simulated : nullptr,
                            *exchanges[p], *pipelines[p].record);
    }
  }
  for (std::size_t p = 0; p < pipelines.size(); ++p) {
    WorkerRecord& record = *pipelines[p].record;
    if (const collectives::AutoDecision* d = collectives::auto_decision(exchanges[p]->aggregator())) {
      record.auto_decision = *d;
    }
    if (pipelines[p].options->verify) record.residual_digest = fnv1a(std::as_bytes(exchanges[p]->feedback().residual()));
  }
}

struct Verification {
  bool matches = true;
  double conservation_rel_error = 0.0;
  std::string first_mismatch;
};

using CheckedWorkers = std::vector<std::pair<int, const WorkerRecord*>>;

// What auto chose at iteration ii (the other aggregators leave it empty): the kept worker's method.
std::string_view step_method(const CheckedWorkers& checked, std::size_t ii) {
  std::string_view method;
  for (const auto& [w, record] : checked) {
    if (record->keep_results) method = record->results[ii].method;
  }
  return method;
}

// Iteration `it` of every checked worker against the replay's last step (an ExchangeReplay or a
// SelectionReplay): the kept worker's sum against the reference, every worker's sum digest against
// the kept one's, every worker's consumed entries against the reference's. Returns the kept sum.
template <class Replay>
const collectives::Aggregation* check_step(const Replay& replay, const CheckedWorkers& checked, int it,
                                           Verification& v) {
  auto mismatch = [&v](const std::string& what) {
    if (v.matches) v.first_mismatch = what;
    v.matches = false;
  };
  const auto ii = static_cast<std::size_t>(it);
  const collectives::Aggregation* kept = nullptr;
  std::uint64_t kept_digest = 0;
  for (const auto& [w, record] : checked) {
    if (!record->keep_results) continue;
    const std::string difference = replay.sum_difference(record->results[ii]);
    if (!difference.empty()) {
      mismatch(fmt::format("worker {} iteration {}: aggregated sum differs from the reference ({})", w, it, difference));
    }
    kept_digest = record->sum_digests[ii];
    kept = &record->results[ii];
  }
  for (const auto& [w, record] : checked) {
    if (record->sum_digests[ii] != kept_digest) {
      mismatch(fmt::format("worker {} iteration {}: its sum differs from the other workers'", w, it));
    }
    if (record->consumed[ii] != replay.reference().consumed[static_cast<std::size_t>(w)]) {
      mismatch(fmt::format("worker {} iteration {}: consumed entries differ from the reference", w, it));
    }
  }
  return kept;
}

// --selections drawn: the same checks against the reference of the drawn selections (regenerated
// here from the seed); there is no residual.
Verification verify_drawn(const CommOptions& o, int workers, const CheckedWorkers& checked) {
  Verification v;
  collectives::SelectionReplay replay(o.aggregator);
  const std::size_t k = k_from_density(o.n, o.density);
  std::vector<SparseVector> selections(static_cast<std::size_t>(workers));
  for (int it = 0; it < o.iters; ++it) {
    const auto ii = static_cast<std::size_t>(it);
    for (int w = 0; w < workers; ++w) {
      draw_selection(selections[static_cast<std::size_t>(w)], o.n, k, o.seed, w, ii, drawn_indices_shared(o));
    }
    replay.step(selections, k, step_method(checked, ii));
    const collectives::Aggregation* kept = check_step(replay, checked, it, v);
    if (kept != nullptr && it + 1 == o.iters) v.conservation_rel_error = replay.conservation_error(*kept);
  }
  return v;
}

// Replays all P workers serially (collectives/replay.hpp) and compares the workers in `checked`
// (all of them in-process; under MPI rank 0 has gathered them): sums, consumed entries, final
// residuals (bitwise, by digest), and conservation of gradient mass at the last iteration against
// the kept worker's sum.
Verification verify(const CommOptions& o, int workers, const CheckedWorkers& checked) {
  if (o.drawn()) return verify_drawn(o, workers, checked);
  Verification v;
  collectives::ExchangeReplay replay(exchange_config(o), o.n, workers);
  const collectives::Aggregation* last_kept = nullptr;
  for (int it = 0; it < o.iters; ++it) {
    const auto iteration = static_cast<std::uint64_t>(it);
    replay.step(iteration, [&](int w, std::span<float> out) { fill_gradient(out, o.seed, w, iteration); },
                step_method(checked, static_cast<std::size_t>(it)));
    last_kept = check_step(replay, checked, it, v);
  }
  for (const auto& [w, record] : checked) {
    if (fnv1a(std::as_bytes(replay.residual(w))) != record->residual_digest) {
      if (v.matches) v.first_mismatch = fmt::format("worker {}: final residual differs from the reference", w);
      v.matches = false;
    }
  }
  if (last_kept != nullptr) v.conservation_rel_error = replay.conservation_error(*last_kept);
  return v;
}

struct Report {
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

// Per iteration, the slowest worker's value.
std::vector<double> max_per_iteration(const std::vector<std::vector<double>>& per_worker) {
  return fold_per_iteration(per_worker, [](double a, double b) { return std::max(a, b); });
}

double median_of_max(const std::vector<std::vector<double>>& per_worker) { return median(max_per_iteration(per_worker)); }

// Per iteration, the sum over workers.
std::vector<double> sum_per_iteration(const std::vector<std::vector<double>>& per_worker) {
  return fold_per_iteration(per_worker, std::plus<>());
}

// The aggregation of a synchronous step: from the moment the last worker has its selection until
// the last worker holds the sum. (A worker that is ready early waits for the others; that wait is
// load imbalance of the compression, not communication.)
std::vector<double> aggregation_ms(const Report& r) {
  const auto ready = max_per_iteration(r.sim_ready_ms);
  const auto summed = max_per_iteration(r.sim_summed_ms);
  std::vector<double> span(ready.size());
  for (std::size_t i = 0; i < span.size(); ++i) span[i] = summed[i] - ready[i];
  return span;
}

double median_aggregation_ms(const Report& r) { return median(aggregation_ms(r)); }

// The aggregation on the transport's clock: from the last worker starting it to the last one
// holding the sum. Under SimGrid SMPI with smpi/simulate-computation:no, compression and the residual
// update take no simulated time, so this is the simulated cluster's communication alone.
double median_clock_ms(const Report& r) {
  const auto start = max_per_iteration(r.clock_start_s);
  const auto end = max_per_iteration(r.clock_end_s);
  std::vector<double> span(start.size());
  for (std::size_t i = 0; i < span.size(); ++i) span[i] = 1e3 * (end[i] - start[i]);
  return median(span);
}

// One run's report: with --json its document (returned, for print_reports to print), otherwise
// printed as text here.
std::optional<nlohmann::json> report_run(const CommOptions& o, int workers, const transport::NetworkSpec& network,
                                         const Report& r) {
  const std::size_t k = k_from_density(o.n, o.density);
  double max_bytes = 0.0, sum_bytes = 0.0, max_messages = 0.0;
  for (const auto& c : r.counters) {
    const double bytes = static_cast<double>(c.bytes_sent) / o.iters;
    max_bytes = std::max(max_bytes, bytes);
    sum_bytes += bytes;
    max_messages = std::max(max_messages, static_cast<double>(c.messages_sent) / o.iters);
  }
  const double mean_bytes = sum_bytes / static_cast<double>(workers);
  const double median_ms = median_of_max(r.wall_ms);
  const std::vector<double> agg_ms = max_per_iteration(r.agg_ms);
  nlohmann::json sim_ms = nullptr, sim_comm_ms = nullptr, model_ms = nullptr, clock_ms = nullptr;
  const transport::NetworkSpec model = network.enabled() ? network : transport::parse_network(o.model_network);
  if (network.enabled()) {
    sim_ms = median_of_max(r.sim_ms);
    sim_comm_ms = median_aggregation_ms(r);
  }
  if (model.enabled()) {
    model_ms = 1e3 * sim::aggregation_cost(o.aggregator, workers, o.n, k, model, wire::parse_index_coding(o.index_coding))
                         .seconds;
  }
  if (r.global_clock) clock_ms = median_clock_ms(r);
  nlohmann::json auto_json = nullptr;
  if (r.auto_decision) {
    const collectives::AutoDecision& d = *r.auto_decision;
    nlohmann::json trials = nlohmann::json::array();
    for (const collectives::AutoTrial& trial : d.trials) {
      trials.push_back({{"aggregator", std::string(trial.aggregator)},
                        {"model_ms", 1e3 * trial.model_seconds},
                        {"measured_ms", trial.runs > 0 ? nlohmann::json(1e3 * trial.measured_seconds) : nlohmann::json()},
                        {"second_ms", trial.runs > 1 ? nlohmann::json(1e3 * trial.second_seconds) : nlohmann::json()},
                        {"runs", trial.runs}});
    }
    // The iterations after the first trials (bench comm has one (n, k), so they come first; any
    // re-trial among them counts: it is part of what auto costs).
    nlohmann::json settled_ms = nullptr;
    if (network.enabled() && (!d.settled.empty() || d.retrials > 0)) {
      const std::vector<double> spans = aggregation_ms(r);
      const auto first = static_cast<std::size_t>(d.first_settled_after);
      if (first < spans.size()) settled_ms = median(std::vector<double>(spans.begin() + static_cast<std::ptrdiff_t>(first), spans.end()));
    }
    auto_json = {{"choice", std::string(d.settled.empty() ? d.last_choice : d.settled)},
                 {"settled", !d.settled.empty()},
                 {"model_choice", std::string(d.model_choice)},
                 {"trials", trials},
                 {"tie_tolerance", collectives::kTrialTieTolerance},
                 {"tie_unless_beaten_twice", true},
                 {"timed_rounds", d.timed_rounds},
                 {"trial_exchanges", d.trial_exchanges},
                 {"timed_exchanges", d.timed_exchanges},
                 {"retrials", d.retrials},
                 {"first_settled_after", d.first_settled_after},
                 {"sim_comm_settled_ms", settled_ms},
                 {"alpha_s", d.network.alpha_seconds},
                 {"seconds_per_byte", d.network.seconds_per_byte},
                 {"network_measured", d.network.measured}};
  }
  if (o.json) {
    nlohmann::json doc = {{"sparsgd", build_identity()},
                          {"transport", o.transport},
                          {"workers", workers},
                          {"n", o.n},
                          {"k", k},
                          {"density", o.density},
                          {"selections", o.selections},
                          {"compressor", o.drawn() ? nlohmann::json() : nlohmann::json(o.compressor)},
                          {"error_feedback", o.drawn() ? nlohmann::json() : nlohmann::json(o.error_feedback)},
                          {"aggregator", o.aggregator},
                          {"auto", auto_json},
                          {"index_coding", o.index_coding},
                          {"network", network.name},
                          {"model_network", model.name},
                          {"iters", o.iters},
                          {"median_ms", median_ms},
                          {"agg_median_ms", median(agg_ms)},
                          {"agg_ms", agg_ms},
                          {"sim_comm_ms_per_iteration", network.enabled() ? nlohmann::json(aggregation_ms(r)) : nlohmann::json()},
                          {"agg_cpu_median_ms", median_of_max(r.agg_cpu_ms)},
                          {"agg_cpu_ms_per_iteration",
                           {{"max", max_per_iteration(r.agg_cpu_ms)}, {"sum", sum_per_iteration(r.agg_cpu_ms)}}},
                          {"agg_minor_faults_per_iteration",
                           o.drawn() ? nlohmann::json(sum_per_iteration(r.agg_minor_faults)) : nlohmann::json()},
                          {"compress_median_ms", median_of_max(r.compress_ms)},
                          {"sim_ms", sim_ms},
                          {"sim_comm_ms", sim_comm_ms},
                          {"clock_ms", clock_ms},
                          {"model_comm_ms", model_ms},
                          {"bytes_sent_per_worker", {{"max", max_bytes}, {"mean", mean_bytes}}},
                          {"messages_per_worker", {{"max", max_messages}}},
                          {"conservation_rel_error", o.verify ? nlohmann::json(r.conservation_rel_error) : nlohmann::json()},
                          {"matches_reference", o.verify ? nlohmann::json(r.matches) : nlohmann::json()},
                          {"memory", memory_json(r.memory)},
                          // --interleave: the other aggregator's document, from the same process.
                          {"interleave", nullptr}};
    return doc;
  }
  fmt::print("comm: transport={} workers={} n={} k={} {} aggregator={} indices={} network={} iters={}\n", o.transport,
             workers, o.n, k, o.drawn() ? "selections=drawn" : "compressor=" + o.compressor, o.aggregator,
             o.index_coding, network.name, o.iters);
  if (r.auto_decision) {
    const collectives::AutoDecision& d = *r.auto_decision;
    fmt::print("  auto: network alpha {:.3g} s, {:.3g} s/byte ({}); closed forms propose {}\n", d.network.alpha_seconds,
               d.network.seconds_per_byte, d.network.measured ? "measured by ping-pong" : "given by --network",
               d.model_choice);
    for (const collectives::AutoTrial& trial : d.trials) {
      fmt::print("    {:<10} model {:.3f} ms, fastest trial {}\n", trial.aggregator, 1e3 * trial.model_seconds,
                 trial.runs > 1   ? fmt::format("{:.3f} ms ({} runs, second {:.3f})", 1e3 * trial.measured_seconds,
                                                               trial.runs, 1e3 * trial.second_seconds)
                 : trial.runs > 0 ? fmt::format("{:.3f} ms ({} run)", 1e3 * trial.measured_seconds, trial.runs)
                                : std::string("not run"));
    }
    if (d.settled.empty()) {
      fmt::print("    {} after {} trial exchanges (more --iters to settle)\n",
                 d.retrials > 0 ? "trying again" : "still trying", d.trial_exchanges);
    } else {
      fmt::print("    settled on {} after {} trial exchanges ({} warm-ups, untimed)\n", d.settled, d.trial_exchanges,
                 d.trial_exchanges - d.timed_exchanges);
    }
    if (d.retrials > 0) {
      fmt::print("    trials run again {} time(s): after {} settled exchanges, then twice as many each time\n",
                 d.retrials, collectives::kAutoRetrialFirst);
    }
  }
  fmt::print("  wall per iteration (median of slowest worker): {:.3f} ms\n", median_ms);
  fmt::print("  of which aggregation alone (after a barrier): {:.3f} ms wall, {:.3f} ms CPU; compression {:.3f} ms\n",
             median(agg_ms), median_of_max(r.agg_cpu_ms), median_of_max(r.compress_ms));
  if (network.enabled()) {
    fmt::print("  simulated iteration: {:.3f} ms, of which aggregation {:.3f} ms\n", sim_ms.get<double>(),
               sim_comm_ms.get<double>());
  }
  if (r.global_clock) fmt::print("  aggregation on the transport's clock (median): {:.3f} ms\n", clock_ms.get<double>());
  if (model.enabled()) fmt::print("  closed-form aggregation on {}: {:.3f} ms\n", model.name, model_ms.get<double>());
  fmt::print("  bytes sent per worker per iteration: max {:.0f}, mean {:.0f}; messages max {:.1f}\n", max_bytes,
             mean_bytes, max_messages);
  if (o.verify) {
    fmt::print("  matches reference: {}; conservation relative error: {:.3g}\n", r.matches ? "yes" : "NO",
               r.conservation_rel_error);
  }
  return std::nullopt;
}

void check_verified(const CommOptions& o, const Report& r) {
  if (!r.matches) throw Error("verification failed (" + o.aggregator + "): " + r.first_mismatch);
  if (o.verify && !(r.conservation_rel_error < 1e-5)) {
    throw Error(fmt::format("conservation violated ({}): relative error {:.3g}", o.aggregator, r.conservation_rel_error));
  }
}

// Prints the runs' reports, --aggregator's first: with --json one document, the interleaved run's
// under "interleave"; then fails if any run did not verify.
void print_reports(const std::vector<std::pair<const CommOptions*, const Report*>>& runs, int workers,
                   const transport::NetworkSpec& network) {
  std::optional<nlohmann::json> doc;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [options, report] = runs[i];
    if (i > 0 && !options->json) {
      fmt::print("interleaved with the run above in the same process, exchange by exchange:\n");
    }
    std::optional<nlohmann::json> run_doc = report_run(*options, workers, network, *report);
    if (!run_doc) continue;
    if (doc) {
      (*doc)["interleave"] = std::move(*run_doc);
    } else {
      doc = std::move(run_doc);
    }
  }
  if (doc) std::printf("%s\n", doc->dump().c_str());
  for (const auto& [options, report] : runs) check_verified(*options, *report);
}

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

CommMemory comm_memory(const CommOptions& o, int workers, int workers_here, bool verifies_here) {
  const std::size_t k = k_from_density(o.n, o.density);
  const double array = 4.0 * static_cast<double>(o.n), p = workers;
  const collectives::AggregatorDescriptor& aggregator = collectives::find_aggregator(o.aggregator);
  // Drawn selections have no gradient, no residual and no compressor, whose top-k scratch is the
  // fraction above 2 in the sparse aggregators' footprints (2.1-2.2 arrays), and one more set of
  // pairs: the selection.
  collectives::Footprint footprint = aggregator.worker_memory;
  collectives::Footprint reference_footprint = aggregator.reference_memory;
  collectives::Footprint result_footprint = aggregator.result_memory;
  const transport::NetworkSpec network = transport::parse_network(o.network);
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
         collectives::plausible_candidates(workers, o.n, k, wire::parse_index_coding(o.index_coding), estimate)) {
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
  const std::string workers_part = fmt::format("{} worker{} x ({}buffers)", workers_here, workers_here == 1 ? "" : "s",
                                               o.drawn() ? "drawn selection, " : "gradient, residual, ");
  CommMemory memory;
  memory.threads = 32.0 * (1 << 20) + workers_here * 8.0 * (1 << 20);
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

// The estimate of one run, or with --interleave of both in one process: the threads once, both
// runs' workers at once, the two replays one after the other, and both runs' kept results.
MemoryEstimate comm_memory_estimate(const CommOptions& o, int workers, int workers_here, bool verifies_here) {
  CommMemory memory = comm_memory(o, workers, workers_here, verifies_here);
  if (!o.interleave.empty()) {
    const CommMemory other = comm_memory(interleaved_options(o), workers, workers_here, verifies_here);
    memory.workers += other.workers;
    memory.replay = std::max(memory.replay, other.replay);
    memory.kept += other.kept;
    memory.workers_part += fmt::format(", twice: --aggregator {} and --interleave {}", o.aggregator, o.interleave);
  }
  MemoryEstimate estimate;
  estimate.add("threads and allocator", memory.threads);
  if (memory.workers >= memory.replay) {
    estimate.add(memory.workers_part, memory.workers);
  } else {
    estimate.add(fmt::format("serial verification of {} workers (after them; --no-verify skips it)", workers),
                 memory.replay);
  }
  if (memory.kept > 0) {
    estimate.add(fmt::format("results kept for verification ({} iterations)", o.iters), memory.kept);
  }
  return estimate;
}

void check_memory(const MemoryEstimate& estimate) {
  require_memory("bench comm", estimate,
                 "lower --n, --workers or --density, or pass --no-verify (the verification replays every worker)");
}

void validate_options(const CommOptions& o) {
  SPARSGD_ENFORCE(o.n >= 1, "--n must be at least 1");
  validate_length(o.n);
  validate_density(o.density);
  SPARSGD_ENFORCE(o.iters >= 1, "--iters must be at least 1, got " << o.iters);
  SPARSGD_ENFORCE(o.timeout_ms >= 1, "--timeout-ms must be at least 1, got " << o.timeout_ms);
  collectives::validate(exchange_config(o));
  if (o.model_network != "none") {
    SPARSGD_ENFORCE(o.network == "none", "--model-network is for runs without --network (which reports the model itself)");
    SPARSGD_ENFORCE(transport::parse_network(o.model_network).enabled(), "--model-network needs a bandwidth");
  }
  SPARSGD_ENFORCE(o.selections == "gradient" || o.selections == "drawn",
                  "unknown --selections '" << o.selections << "' (expected gradient or drawn)");
  SPARSGD_ENFORCE(o.transport == "local" || o.transport == "mpi",
                  "unknown transport '" << o.transport << "' (expected local or mpi)");
  if (!o.interleave.empty()) {
    SPARSGD_ENFORCE(o.transport == "local", "--interleave runs both aggregators on the workers of one process: it needs "
                                            "--transport local, not " << o.transport);
    SPARSGD_ENFORCE(o.interleave != o.aggregator,
                    "--interleave " << o.interleave << " is --aggregator itself: name another aggregator");
    collectives::validate(exchange_config(interleaved_options(o)));
  }
}

// The report of one run's in-process workers.
Report local_report(const CommOptions& o, const std::vector<WorkerRecord>& records) {
  Report report;
  for (const WorkerRecord& rec : records) {
    report.wall_ms.push_back(rec.wall_ms);
    report.agg_ms.push_back(rec.agg_ms);
    report.agg_cpu_ms.push_back(rec.agg_cpu_ms);
    report.agg_minor_faults.push_back(rec.agg_minor_faults);
    report.compress_ms.push_back(rec.compress_ms);
    report.sim_ms.push_back(rec.sim_ms);
    report.sim_ready_ms.push_back(rec.sim_ready_ms);
    report.sim_summed_ms.push_back(rec.sim_summed_ms);
    report.clock_start_s.push_back(rec.clock_start_s);
    report.clock_end_s.push_back(rec.clock_end_s);
    report.counters.push_back(rec.counters);
  }
  report.global_clock = true;  // steady_clock, one process
  report.auto_decision = records[0].auto_decision;
  if (o.verify) {
    CheckedWorkers checked;
    for (std::size_t w = 0; w < records.size(); ++w) checked.emplace_back(static_cast<int>(w), &records[w]);
    const Verification v = verify(o, static_cast<int>(records.size()), checked);
    report.matches = v.matches;
    report.first_mismatch = v.first_mismatch;
    report.conservation_rel_error = v.conservation_rel_error;
  }
  return report;
}

void run_local(const CommOptions& o, const transport::NetworkSpec& network) {
  SPARSGD_ENFORCE(o.workers >= 1 && o.workers <= 4096, "--workers must be in [1, 4096], got " << o.workers);
  const double resident_before = resident_bytes();
  const MemoryEstimate memory = comm_memory_estimate(o, o.workers, o.workers, true);
  check_memory(memory);
  std::vector<CommOptions> options = {o};
  if (!o.interleave.empty()) options.push_back(interleaved_options(o));
  // [run][worker]
  std::vector<std::vector<WorkerRecord>> records(options.size(), std::vector<WorkerRecord>(static_cast<std::size_t>(o.workers)));
  for (auto& run : records) run[0].keep_results = true;
  transport::run_local_workers(
      o.workers,
      [&](transport::Transport& t) {
        std::vector<Pipeline> pipelines;
        for (std::size_t i = 0; i < options.size(); ++i) {
          pipelines.push_back({&options[i], &records[i][static_cast<std::size_t>(t.rank())]});
        }
        run_worker(pipelines, network, t);
      },
      std::chrono::milliseconds(o.timeout_ms));
  std::vector<Report> reports;
  for (std::size_t i = 0; i < options.size(); ++i) reports.push_back(local_report(options[i], records[i]));
  // After the verification, whose replay may need more than the workers did. One process: its
  // memory is both runs' (the same figures in both reports).
  const MemoryUse memory_use{memory.total(), resident_before, peak_resident_bytes()};
  for (Report& report : reports) report.memory = memory_use;
  std::vector<std::pair<const CommOptions*, const Report*>> runs;
  for (std::size_t i = 0; i < options.size(); ++i) runs.emplace_back(&options[i], &reports[i]);
  print_reports(runs, o.workers, network);
}

// Gathers a vector of doubles (the same length everywhere) at rank 0.
std::vector<std::vector<double>> gather(transport::Transport& t, const std::vector<double>& mine, int tag) {
  std::vector<std::vector<double>> all;
  std::vector<std::byte> buffer;
  const std::size_t bytes = mine.size() * sizeof(double);
  if (t.rank() == 0) {
    all.push_back(mine);
    for (int r = 1; r < t.size(); ++r) {
      if (t.recv(r, tag, buffer, bytes) != bytes) throw transport::TransportError("bad report message");
      std::vector<double> v(mine.size());
      std::memcpy(v.data(), buffer.data(), bytes);
      all.push_back(std::move(v));
    }
  } else {
    t.send(0, tag, std::as_bytes(std::span(mine)));
  }
  return all;
}

// What rank 0 needs of another rank to check it: per iteration the digest of its sum and its
// consumed flags, then the digest of its final residual. As u64 words: digest, count, the flags
// (count bytes, padded to a word) per iteration, then the residual digest.
std::vector<std::uint64_t> encode_checked(const WorkerRecord& r) {
  std::vector<std::uint64_t> words;
  for (std::size_t it = 0; it < r.sum_digests.size(); ++it) {
    const auto& flags = r.consumed[it];
    words.push_back(r.sum_digests[it]);
    words.push_back(flags.size());
    const std::size_t at = words.size();
    words.resize(at + (flags.size() + 7) / 8, 0);
    if (!flags.empty()) std::memcpy(words.data() + at, flags.data(), flags.size());
  }
  words.push_back(r.residual_digest);
  return words;
}

WorkerRecord decode_checked(std::span<const std::byte> bytes, int iters, std::size_t n, int from) {
  auto bad = [from] { return transport::TransportError(fmt::format("bad verification message from rank {}", from)); };
  if (bytes.size() % 8 != 0) throw bad();
  std::vector<std::uint64_t> words(bytes.size() / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  WorkerRecord r;
  std::size_t at = 0;
  for (int it = 0; it < iters; ++it) {
    if (words.size() - at < 3) throw bad();
    r.sum_digests.push_back(words[at]);
    const std::uint64_t count = words[at + 1];
    at += 2;
    if (count > n || (count + 7) / 8 > words.size() - at - 1) throw bad();
    std::vector<std::uint8_t> flags(count);
    if (count > 0) std::memcpy(flags.data(), words.data() + at, count);
    r.consumed.push_back(std::move(flags));
    at += (count + 7) / 8;
  }
  if (words.size() - at != 1) throw bad();
  r.residual_digest = words[at];
  return r;
}

// Every rank's record at rank 0, its own first; the other ranks get nothing back.
std::vector<WorkerRecord> gather_checked(transport::Transport& t, WorkerRecord&& mine, const CommOptions& o, int tag) {
  std::vector<WorkerRecord> all;
  if (t.rank() != 0) {
    const auto words = encode_checked(mine);
    t.send(0, tag, std::as_bytes(std::span(words)));
    return all;
  }
  all.push_back(std::move(mine));
  std::vector<std::byte> buffer;
  const std::size_t max_bytes = 8 * (1 + static_cast<std::size_t>(o.iters) * (2 + (o.n + 7) / 8));
  for (int r = 1; r < t.size(); ++r) {
    t.recv(r, tag, buffer, max_bytes);
    all.push_back(decode_checked(buffer, o.iters, o.n, r));
  }
  return all;
}

// Rank 0 checks every rank against one serial replay of all of them (the replay holds P
// residuals of n floats, so it is done once, not on every rank); the others send it their digests
// and consumed flags and it alone reports.
void run_mpi_rank(transport::Transport& t, const CommOptions& o, const transport::NetworkSpec& network) {
  const double resident_before = resident_bytes();
  const MemoryEstimate memory =
      comm_memory_estimate(o, t.size(), static_cast<int>(std::min<long>(detect_mpi_launch().local_size, t.size())),
                           t.rank() == 0);
  check_memory(memory);
  WorkerRecord record;
  record.keep_results = t.rank() == 0;
  run_worker({{&o, &record}}, network, t);
  std::vector<double> summary = {static_cast<double>(record.counters.bytes_sent),
                                 static_cast<double>(record.counters.messages_sent)};
  for (auto* series : {&record.wall_ms, &record.sim_ms, &record.sim_ready_ms, &record.sim_summed_ms, &record.agg_ms,
                       &record.agg_cpu_ms, &record.compress_ms, &record.clock_start_s, &record.clock_end_s,
                       &record.agg_minor_faults}) {
    series->resize(static_cast<std::size_t>(o.iters), 0.0);
    summary.insert(summary.end(), series->begin(), series->end());
  }
  const auto all = gather(t, summary, 950);
  const std::optional<collectives::AutoDecision> auto_decision = record.auto_decision;
  std::vector<WorkerRecord> records;
  if (o.verify) records = gather_checked(t, std::move(record), o, 960);
  if (t.rank() != 0) return;
  Report report;
  const auto iters = static_cast<std::size_t>(o.iters);
  for (const auto& s : all) {
    transport::TrafficCounters c;
    c.bytes_sent = static_cast<std::uint64_t>(s[0]);
    c.messages_sent = static_cast<std::uint64_t>(s[1]);
    report.counters.push_back(c);
    auto series = [&s, iters](std::size_t which) {
      const auto begin = s.begin() + 2 + static_cast<std::ptrdiff_t>(which * iters);
      return std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(iters));
    };
    report.wall_ms.push_back(series(0));
    report.agg_ms.push_back(series(4));
    report.agg_cpu_ms.push_back(series(5));
    report.compress_ms.push_back(series(6));
    if (network.enabled()) {
      report.sim_ms.push_back(series(1));
      report.sim_ready_ms.push_back(series(2));
      report.sim_summed_ms.push_back(series(3));
    }
    report.clock_start_s.push_back(series(7));
    report.clock_end_s.push_back(series(8));
    report.agg_minor_faults.push_back(series(9));
  }
  report.global_clock = kGlobalMpiClock;
  report.auto_decision = auto_decision;
  if (o.verify) {
    std::vector<std::pair<int, const WorkerRecord*>> checked;
    for (int w = 0; w < t.size(); ++w) checked.emplace_back(w, &records[static_cast<std::size_t>(w)]);
    const Verification v = verify(o, t.size(), checked);
    report.matches = v.matches;
    report.first_mismatch = v.first_mismatch;
    report.conservation_rel_error = v.conservation_rel_error;
  }
  report.memory = {memory.total(), resident_before, peak_resident_bytes()};
  print_reports({{&o, &report}}, t.size(), network);
}

// Everything that must be the same on every rank (not --workers: one per rank).
collectives::ConfigFields comm_config_fields(const CommOptions& o) {
  using collectives::field_value;
  return {{"--n", std::to_string(o.n)},
          {"--density", field_value(o.density)},
          {"--compressor", o.compressor},
          {"--aggregator", o.aggregator},
          {"--network", o.network},
          {"--model-network", o.model_network},
          {"--r-factor", field_value(o.r_factor)},
          {"--threshold-period", std::to_string(o.threshold_period)},
          {"--error-feedback", o.error_feedback ? "on" : "off"},
          {"--index-coding", o.index_coding},
          {"--auto-trials", std::to_string(o.auto_trials)},
          {"--iters", std::to_string(o.iters)},
          {"--seed", std::to_string(o.seed)},
          {"--timeout-ms", std::to_string(o.timeout_ms)},
          {"--verify", o.verify ? "on" : "off"},
          {"--json", o.json ? "on" : "off"},
          {"--ring-allreduce", o.ring_allreduce ? "on" : "off"},
          {"--selections", o.selections},
          {"--interleave", o.interleave}};
}

// transport_given / workers_given: whether the user named them.
// compressor_given: whether the user named an option of the compression (which drawn selections skip).
void run_bench_comm(CommOptions o, bool transport_given, bool workers_given, bool compressor_given) {
  SPARSGD_ENFORCE(!(o.drawn() && compressor_given),
                  "--selections drawn draws every worker's k entries itself: --compressor, --r-factor, "
                  "--threshold-period and --error-feedback do not apply to it");
  const MpiLaunch launch = detect_mpi_launch();
  if (launch.launched && !transport_given) o.transport = "mpi";  // under mpirun: one worker per rank
  SPARSGD_ENFORCE(!(launch.launched && o.transport == "local" && launch.size > 1),
                  "--transport local under a launch of " << launch.size << " ranks (" << launch.variable
                      << " is set) would run the whole benchmark in every rank: use --transport mpi, or start it "
                         "without mpirun");
  validate_options(o);
  const transport::NetworkSpec network = transport::parse_network(o.network);
  if (o.transport == "local") {
    run_local(o, network);
    return;
  }
  run_mpi_job(std::chrono::milliseconds(o.timeout_ms), "bench comm",
              workers_given ? std::optional<int>(o.workers) : std::nullopt, [&](transport::Transport& t) {
                collectives::check_ranks_agree(t, comm_config_fields(o), "the bench comm options");
                run_mpi_rank(t, o, network);
              });
}

}  // namespace

void register_bench_comm(CLI::App& bench) {
  auto opt = std::make_shared<CommOptions>();
  CLI::App* cmd = bench.add_subcommand("comm", "Compression + aggregation + error feedback on P workers, verified");
  cmd->add_option("--transport", opt->transport, "local (threads in this process) or mpi (under mpirun)")->capture_default_str();
  cmd->add_option("--workers", opt->workers, "workers for the local transport")->capture_default_str();
  cmd->add_option("--n", opt->n, "gradient length")->capture_default_str()->check(non_negative_integer());
  cmd->add_option("--density", opt->density, "fraction of entries each worker selects, in (0, 1]")->capture_default_str();
  cmd->add_option("--compressor", opt->compressor,
                  "topk, topk-reuse, randk, randk-unbiased (needs --error-feedback off), rtopk, gaussiank, dgc or none")
      ->capture_default_str();
  cmd->add_option("--aggregator", opt->aggregator, aggregator_help())->capture_default_str();
  cmd->add_option("--network", opt->network, "none, 1gbe, 10gbe, paper-1gbe or alpha=SECONDS,bw=BITS_PER_SECOND")->capture_default_str();
  cmd->add_option("--model-network", opt->model_network,
                  "report the closed-form aggregation cost on this network (as --network) next to a measurement "
                  "that is not simulated here (a real network, or SimGrid SMPI's)")
      ->capture_default_str();
  cmd->add_option("--r-factor", opt->r_factor, "rtopk: r = ceil(r_factor * k)")->capture_default_str();
  cmd->add_option("--threshold-period", opt->threshold_period,
                  "topk-reuse: exact top-k every this many iterations, one filter pass against its threshold between")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_on_off_option(cmd, "--error-feedback", opt->error_feedback,
                    "on: what a worker did not get into the sum stays in its residual; off: it is dropped");
  cmd->add_option("--index-coding", opt->index_coding,
                  "raw (32 bits an index) or compressed (gaps packed in blocks, or a bitmap, whichever is smaller: "
                  "about 13 bits an index at density 0.001); allgather, gtopk, gtopk-rd and oktopk")
      ->capture_default_str();
  cmd->add_option("--auto-trials", opt->auto_trials, auto_trials_help())
      ->check(CLI::Range(0, collectives::kMaxAutoTrialRounds))
      ->capture_default_str();
  cmd->add_option("--iters", opt->iters, "iterations")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "seed of the synthetic gradients and random compressors")->capture_default_str()->check(non_negative_integer());
  cmd->add_option("--timeout-ms", opt->timeout_ms, "longest wait for a peer before failing")->capture_default_str();
  cmd->add_flag("!--no-verify", opt->verify, "skip the serial reference check");
  cmd->add_flag("--json", opt->json, "print one JSON object");
  cmd->add_flag("--ring-allreduce", opt->ring_allreduce,
                "dense: the library's ring over point-to-point messages even where the transport has its own "
                "allreduce (MPI); with --network it always is");
  cmd->add_option("--selections", opt->selections,
                  "gradient: each worker compresses its synthetic gradient with error feedback; drawn: each draws k "
                  "uniformly random entries and only the aggregation runs (memory O(P k), not O(P n))")
      ->capture_default_str();
  cmd->add_option("--interleave", opt->interleave,
                  "another aggregator, run on the same workers in the same process with its own compressor and "
                  "residual, its exchanges alternating with --aggregator's (which goes first alternates too), so "
                  "that two aggregators are compared under the same conditions; --json gives its report under "
                  "\"interleave\" (--transport local)");
  cmd->callback([opt, cmd] {
    const bool compressor_given = cmd->count("--compressor") + cmd->count("--r-factor") +
                                      cmd->count("--threshold-period") + cmd->count("--error-feedback") > 0;
    run_bench_comm(*opt, cmd->count("--transport") > 0, cmd->count("--workers") > 0, compressor_given);
  });
}

}  // namespace sparsgd::cli
