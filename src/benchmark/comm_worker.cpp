// The worker's loop of the communication benchmark: gradients made (or selections drawn) every
// iteration, the exchange timed on the wall clock, the thread's CPU clock and the simulated
// network's virtual clock, and what the verification needs kept.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "benchmark/comm_worker.hpp"
#include "collectives/blocks/tags.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/hash.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/transport/wrapper.hpp"

namespace sparsgd::benchmark {

namespace {

std::uint64_t digest_of(const std::vector<float>& dense) { return fnv1a(std::as_bytes(std::span(dense))); }

std::uint64_t digest_of(const collectives::Aggregation& a) {
  if (a.dense) return digest_of(a.dense_sum);
  return fnv1a(std::as_bytes(std::span(a.sum.values)), fnv1a(std::as_bytes(std::span(a.sum.indices))));
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

// Which pipeline runs `turn`-th in iteration `it`: in turn, the first alternating, so that neither
// always runs right after the gradient is made or right after the other.
std::size_t pipeline_at(std::size_t turn, int it, std::size_t pipelines) {
  return (turn + static_cast<std::size_t>(it)) % pipelines;
}

// Every iteration starts when the slowest worker is ready, as in synchronous SGD: the virtual
// clocks are set to their maximum; returns the start.
double align_iteration_start(transport::Transport& base, transport::SimulatedNetwork& simulated) {
  simulated.now();
  simulated.set_clock(max_over_ranks(base, simulated.now(), tag_block(collectives::TagUser::benchmark_harness)[collectives::tag_offsets::kHarnessClock]));
  return simulated.now();
}

// What the verification needs of one iteration's result.
void keep_for_verification(const CommBenchmarkOptions& o, const collectives::Aggregation& result, WorkerRecord& record) {
  if (!o.verify) return;
  record.consumed.push_back(result.consumed);
  record.sum_digests.push_back(digest_of(result));
  if (record.keep_results) record.results.push_back(result);
}

bool drawn_indices_shared(const CommBenchmarkOptions& o) {
  return collectives::find_aggregator(o.exchange.aggregator).properties.needs_shared_indices;
}

// One drawn exchange of one pipeline: the aggregation alone, timed as the exchange times it (two
// barriers, then from the transport's clock at the start to its end).
void run_drawn_exchange(const CommBenchmarkOptions& o, transport::Transport& base, transport::Transport& comm,
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
        pipeline.options->exchange.aggregator, {config.index_coding, config.network, config.auto_trial_rounds}));
  }
  const CommBenchmarkOptions& o = *pipelines.front().options;
  const std::size_t k = k_from_density(o.n, o.exchange.density);
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
void run_gradient_exchange(const CommBenchmarkOptions& o, int it, std::span<const float> gradient, transport::Transport& base,
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

}  // namespace

void run_worker(const std::vector<Pipeline>& pipelines, const transport::NetworkSpec& network,
                transport::Transport& base) {
  const CommBenchmarkOptions& o = *pipelines.front().options;
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


}  // namespace sparsgd::benchmark
