// The training loop over any task: each iteration a worker's forward and backward (the task's),
// the gradient exchange and the optimizer step (the training optimizer's), the records; at the
// end of each epoch an evaluation. Resume, checkpoints, run records, schedules and injected
// faults live in their own files beside this one.

#include "sparsgd/torch/trainer.hpp"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "injected_faults.hpp"
#include "resume.hpp"
#include "run_checkpoint.hpp"
#include "run_directory.hpp"
#include "run_records.hpp"
#include "run_state.hpp"
#include "schedules.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"
#include "sparsgd/core/stop_request.hpp"
#include "sparsgd/torch/task.hpp"
#include "sparsgd/torch/training_optimizer.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Iterations the whole run takes: its epochs, cut at --max-iters if that is given.
std::uint64_t iterations_in_run(const TrainConfig& c, std::size_t per_epoch) {
  const std::uint64_t all = per_epoch * static_cast<std::uint64_t>(c.epochs);
  return c.max_iters > 0 ? std::min<std::uint64_t>(all, c.max_iters) : all;
}

// One worker's run. The constructor sets up (model, optimizer, identical initial parameters,
// resume, records); run() is the loop.
class TrainingRun {
 public:
  TrainingRun(transport::Transport& base, const TrainConfig& config, const Task& task, TrainObserver* observer,
              const MemoryUse& memory)
      : base_(base), c_(config), p_(base.size()), rank_(base.rank()), observer_(base.rank() == 0 ? observer : nullptr),
        reporter_(base.rank() == 0), start_(Clock::now()) {
    // Before anything else goes over the wire: ranks launched with different options would train
    // silently apart, or wait for messages that never come.
    collectives::check_ranks_agree(base_, run_config_fields(c_), "the training options");
    const transport::NetworkSpec network = transport::parse_network(c_.exchange.network);
    fault_ = parse_fault_plan(c_.inject_fault);
    SPARSGD_ENFORCE(!fault_ || fault_->rank < p_,
                    "--inject-fault names rank " << (fault_ ? fault_->rank : 0) << " but there are " << p_ << " workers");
    if (network.enabled()) simulated_.emplace(base_, network);
    worker_ = task.make_worker(rank_, p_);
    has_validation_ = task.has_validation();
    buffers_.emplace(worker_->model().float_buffers());
    std::vector<std::string> names;
    for (auto& [name, tensor] : worker_->model().named_parameters()) {
      names.push_back(name);
      parameters_.push_back(tensor);
    }
    collectives::ExchangeConfig exchange = exchange_config(c_);
    if (collectives::find_aggregator(exchange.aggregator).properties.delegates) {
      // auto: the network it chooses for (given by --network, else measured once, here), and its
      // choice for the whole model (per layer, each layer's size decides).
      if (!exchange.network.known) exchange.network = collectives::measure_network(comm());
      std::int64_t parameters = 0;
      for (const auto& tensor : parameters_) parameters += tensor.numel();
      const auto n = static_cast<std::size_t>(parameters);
      summary_.auto_network = exchange.network;
      summary_.auto_choice = std::string(
          collectives::cheapest_aggregator(p_, n, k_from_density(n, exchange.density), exchange.index_coding, exchange.network));
      if (rank_ == 0) {
        std::printf("auto: alpha %.3g s, %.3g s/byte (%s): the closed forms propose %s for the whole model; "
                    "timed trials decide\n", exchange.network.alpha_seconds,
                    exchange.network.seconds_per_byte, exchange.network.measured ? "measured by ping-pong" : "--network",
                    summary_.auto_choice.c_str());
        std::fflush(stdout);
      }
    }
    const SgdConfig sgd{c_.momentum, c_.nesterov, c_.weight_decay, uses_momentum_correction(c_), c_.per_layer,
                        c_.on_nonfinite == "skip"};
    optimizer_ = make_training_optimizer(c_.optimizer, comm(), parameters_, names, exchange, sgd);
    // Identical initial parameters everywhere: rank 0's. Setup, not training: not on the clock.
    std::vector<float> values(optimizer_->size());
    optimizer_->flat().gather_values(values);
    collectives::broadcast(base_, values, 0);
    optimizer_->flat().scatter_values(values);

    per_epoch_ = task.iterations_per_epoch(p_);
    data_identity_ = task.identity();
    steps_total_ = iterations_in_run(c_, per_epoch_);
    summary_.task = task.name();
    summary_.model = task.model_name();
    summary_.metric = task.metric();
    summary_.compressor = c_.exchange.compressor;
    summary_.aggregator = c_.exchange.aggregator;
    summary_.network = network.name;
    summary_.optimizer = c_.optimizer;
    summary_.r_factor =
        compress::find_compressor(c_.exchange.compressor).properties.uses_r_factor ? c_.exchange.r_factor : 0.0;
    summary_.error_feedback = c_.exchange.error_feedback;
    summary_.options = run_config_fields(c_);
    summary_.parameters = worker_->model().parameter_count();
    summary_.workers = p_;
    summary_.epochs = c_.epochs;
    summary_.density = c_.exchange.density;
    summary_.memory = memory;
    if (!c_.resume_dir.empty()) resume();
    open_records();
  }

  TrainSummary run() {
    for (int epoch = state_.epoch; epoch < c_.epochs && state_.step < steps_total_; ++epoch) {
      const bool resumed_mid_epoch = epoch == state_.epoch && state_.next_iteration > 0;
      if (!resumed_mid_epoch) state_.epoch_loss_sum = state_.epoch_batches = 0.0;
      state_.epoch = epoch;
      worker_->start_epoch(epoch, resumed_mid_epoch);
      for (std::uint64_t it = resumed_mid_epoch ? state_.next_iteration : 0; it < per_epoch_ && state_.step < steps_total_;
           ++it) {
        stop_if_asked();
        iterate(epoch, it);
      }
      end_epoch(epoch);
      state_.next_iteration = 0;
    }
    if (metrics_) metrics_->durable();
    summary_.iterations = state_.step;
    summary_.skipped_steps = state_.skipped_steps;
    summary_.compute_seconds = state_.compute_seconds;
    summary_.compression_seconds = state_.compression_seconds;
    summary_.communication_seconds = state_.communication_seconds;
    summary_.wall_seconds = wall();
    summary_.auto_settled.clear();
    for (const collectives::Aggregator* aggregator : summary_.auto_network ? optimizer_->aggregators()
                                                                           : std::vector<const collectives::Aggregator*>{}) {
      if (const collectives::AutoDecision* d = collectives::auto_decision(*aggregator)) {
        summary_.auto_settled.emplace_back(d->settled.empty() ? d->last_choice : d->settled);
      }
    }
    summary_.memory.peak_resident_bytes = peak_resident_bytes();
    if (reporter_ && !out_dir().empty()) write_file_atomically(out_dir() / "summary.json", to_json(summary_) + '\n');
    return summary_;
  }

 private:
  void iterate(int epoch, std::uint64_t it) {
    const double cpu_start = transport::thread_cpu_seconds();
    const std::optional<double> loss = worker_->train_step(epoch, it);
    if (loss) {
      if (fault_) inject_fault_after_backward(*fault_, rank_, state_.step, c_.timeout_ms, base_, parameters_);
      if (c_.clip_norm > 0.0) torch::nn::utils::clip_grad_norm_(parameters_, c_.clip_norm);
      state_.epoch_loss_sum += *loss;
      state_.epoch_batches += 1.0;
    }
    const double compute = transport::thread_cpu_seconds() - cpu_start;
    const double position = epoch + static_cast<double>(it) / static_cast<double>(per_epoch_);
    const double lr = learning_rate(c_, p_, position);
    if (const double density = density_at(c_, position); density != optimizer_->density()) {
      optimizer_->set_density(density);
    }
    const StepStats stats = optimizer_->step(state_.step, lr);
    note_skips(stats);
    state_.bytes_sent += stats.bytes_sent;
    state_.compute_seconds += compute;
    state_.compression_seconds += stats.compress_cpu_seconds;
    state_.communication_seconds += stats.aggregate_wall_seconds;
    state_.next_iteration = it + 1;
    ++state_.step;
    if (reporter_) {
      const IterationRecord record{epoch, state_.step, steps_total_, loss.value_or(0.0), lr, optimizer_->density(),
                                   stats.bytes_sent, compute, stats.compress_cpu_seconds,
                                   stats.aggregate_wall_seconds, simulated_now(), wall()};
      if (metrics_) metrics_->append(metrics_row(record));
      if (observer_) observer_->on_iteration(record);
    }
    if (c_.checkpoint_every > 0 && state_.step % static_cast<std::uint64_t>(c_.checkpoint_every) == 0 &&
        state_.step < steps_total_) {
      save_checkpoint();
    }
  }

  // Evaluation on the test set, off the simulated clock, with batch-norm statistics averaged over
  // the workers (each saw its own batches).
  void end_epoch(int epoch) {
    if (simulated_) simulated_->discard_compute();
    if (buffers_->size() > 0) {
      std::vector<float> mine(buffers_->size());
      buffers_->gather_values(mine);
      std::vector<double> sum(mine.begin(), mine.end());
      collectives::allreduce_sum(base_, sum);
      for (std::size_t i = 0; i < sum.size(); ++i) mine[i] = static_cast<float>(sum[i] / p_);
      buffers_->scatter_values(mine);
    }
    const Evaluation eval = worker_->evaluate(EvalSet::test, base_);
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    const Evaluation validation =
        has_validation_ ? worker_->evaluate(EvalSet::validation, base_) : Evaluation{kNone, kNone};
    double totals[4] = {state_.epoch_loss_sum, state_.epoch_batches, static_cast<double>(state_.bytes_sent),
                        static_cast<double>(state_.step)};
    collectives::allreduce_sum(base_, totals);
    EpochResult result{.epoch = epoch, .iterations = state_.step,
                       .train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0, .test_loss = eval.loss,
                       .test_accuracy = eval.accuracy,
                       .test_perplexity = summary_.metric == "perplexity" ? std::exp(eval.loss) : 0.0,
                       .validation_loss = validation.loss,
                       .validation_accuracy = validation.accuracy,
                       .wall_seconds = wall(), .simulated_seconds = simulated_now(),
                       .bytes_per_iteration = totals[3] > 0 ? totals[2] / totals[3] : 0.0};  // mean over workers
    state_.history.push_back(result);
    summary_.history = state_.history;
    summary_.final_train_loss = result.train_loss;
    summary_.final_test_loss = result.test_loss;
    summary_.final_test_accuracy = result.test_accuracy;
    summary_.final_test_perplexity = result.test_perplexity;
    summary_.final_validation_loss = result.validation_loss;
    summary_.final_validation_accuracy = result.validation_accuracy;
    summary_.bytes_per_iteration = result.bytes_per_iteration;
    summary_.simulated_seconds = result.simulated_seconds;
    if (simulated_) simulated_->discard_compute();
    if (reporter_) {
      if (!out_dir().empty()) write_epochs(out_dir() / "epochs.csv", state_.history);
      if (observer_) observer_->on_epoch(result);
    }
  }

  void resume() {
    const ResumePoint point =
        agree_on_resume_point(base_, c_, {fingerprint(c_, p_), data_identity_, per_epoch_, checkpoint_bound()});
    if (!point.warning.empty()) std::fprintf(stderr, "sparsgd: warning: %s\n", point.warning.c_str());
    RunParts parts = this->parts();
    restore(point.checkpoint, parts);
    wall_before_ = state_.wall_seconds;
    if (simulated_) simulated_->set_clock(state_.simulated_seconds);
    summary_.resumed = true;
    summary_.resumed_at = state_.step;
    last_checkpoint_ = state_.step;
    last_checkpoint_run_ = c_.resume_dir;
    // Before anything is written: a shorter run resumed from a longer one's checkpoint would
    // rewrite that run's summary and drop its rows.
    if (state_.step > steps_total_) {
      throw InvalidArgument("the checkpoints in " + c_.resume_dir + " are at iteration " + std::to_string(state_.step) +
                            ", beyond the " + std::to_string(steps_total_) +
                            " iterations of this run (--max-iters, --epochs): resuming would rewrite a longer run's "
                            "results; resume with that run's --max-iters and --epochs");
    }
  }

  void open_records() {
    if (reporter_ && !out_dir().empty()) {
      fs::create_directories(out_dir());
      if (summary_.resumed) {
        restart_metrics(fs::path(c_.resume_dir) / "metrics.csv", out_dir() / "metrics.csv", state_.step);
      } else {
        write_file_atomically(out_dir() / "metrics.csv", kMetricsHeader);
      }
      metrics_.emplace(out_dir() / "metrics.csv");
    }
    if (observer_) observer_->on_start(summary_, steps_total_);
  }

  void save_checkpoint() {
    if (metrics_) metrics_->durable();  // every row the checkpoint covers is on disk before it is
    state_.wall_seconds = wall();
    state_.simulated_seconds = simulated_now();
    const Checkpoint ckpt = capture(parts(), fingerprint(c_, p_), data_identity_, rank_, p_);
    const fs::path dir = out_dir() / "checkpoints";
    fs::create_directories(dir);
    const std::string file = (dir / checkpoint_file(rank_, false)).string();
    if (fault_ && fault_->kind == FaultPlan::Kind::crash_checkpoint && rank_ == fault_->rank &&
        state_.step >= fault_->iteration) {
      crash_while_writing(file, ckpt);
    }
    write_checkpoint(file, ckpt, (dir / checkpoint_file(rank_, true)).string());
    last_checkpoint_ = state_.step;
    last_checkpoint_run_ = out_dir();
    if (simulated_) simulated_->discard_compute();
  }

  // SIGINT or SIGTERM (when the program installed the handlers): stop between iterations, with
  // the rows so far on disk, saying what can be resumed.
  void stop_if_asked() {
    const int signal = stop_requested();
    if (signal == 0) return;
    if (metrics_) metrics_->durable();
    std::string message =
        "interrupted by " + signal_name(signal) + " after iteration " + std::to_string(state_.step) + "; ";
    if (!last_checkpoint_) {
      message += c_.checkpoint_every > 0 ? "no checkpoint was written yet: nothing to resume from"
                                         : "no checkpoints (--checkpoint-every 0): nothing to resume from";
    } else {
      // This rank's; the others may be a checkpoint ahead or behind, and a resume starts from the
      // newest iteration that every rank holds.
      message += "rank " + std::to_string(rank_) + "'s newest checkpoint is at iteration " +
                 std::to_string(*last_checkpoint_) + " in " + (last_checkpoint_run_ / "checkpoints").string() +
                 ": continue with the same options and --resume " + last_checkpoint_run_.string();
    }
    throw Interrupted(message, signal);
  }

  void note_skips(const StepStats& stats) {
    if (!stats.skipped) {
      consecutive_skips_ = 0;
      return;
    }
    ++state_.skipped_steps;
    if (++consecutive_skips_ >= kMaxConsecutiveSkips) {
      throw InvalidData("gradients were non-finite for " + std::to_string(consecutive_skips_) +
                        " iterations in a row (last: " + stats.skip_reason + "): the run has diverged; stopping");
    }
    if (stats.skip_reason.find("parameter") != std::string::npos) {
      std::fprintf(stderr, "sparsgd: warning: skipped iteration %llu: %s\n",
                   static_cast<unsigned long long>(state_.step), stats.skip_reason.c_str());
    }
  }

  RunParts parts() { return {*optimizer_, *buffers_, *worker_, state_}; }

  // The most a checkpoint of this run can hold: 16 floats for each parameter and buffer value (the
  // values, residuals, velocities, optimizer moments hold at most 8), 11 doubles of history an
  // epoch, and 64 MiB for the rest (the task's carried state, names, the fingerprint).
  std::uint64_t checkpoint_bound() {
    const auto values = static_cast<std::uint64_t>(optimizer_->size() + buffers_->size());
    return 16 * 4 * values + 88 * static_cast<std::uint64_t>(c_.epochs) + (std::uint64_t{64} << 20);
  }
  transport::Transport& comm() { return simulated_ ? static_cast<transport::Transport&>(*simulated_) : base_; }
  double simulated_now() { return simulated_ ? simulated_->now() : 0.0; }
  // Resumed runs count the time before the checkpoint, as the checkpoint recorded it.
  double wall() const { return wall_before_ + std::chrono::duration<double>(Clock::now() - start_).count(); }
  fs::path out_dir() const { return c_.out_dir; }

  transport::Transport& base_;
  const TrainConfig& c_;
  const int p_, rank_;
  TrainObserver* observer_;
  const bool reporter_;
  const Clock::time_point start_;
  double wall_before_ = 0.0;
  std::optional<FaultPlan> fault_;
  std::optional<transport::SimulatedNetwork> simulated_;
  std::unique_ptr<TaskWorker> worker_;
  bool has_validation_ = false;
  std::optional<FlatParameters> buffers_;  // batch-norm statistics
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<TrainingOptimizer> optimizer_;
  std::size_t per_epoch_ = 0;
  std::string data_identity_;  // Task::identity(): what a checkpoint is trained on
  std::uint64_t steps_total_ = 0;
  RunState state_;
  TrainSummary summary_;
  std::optional<AppendFile> metrics_;
  std::optional<std::uint64_t> last_checkpoint_;
  fs::path last_checkpoint_run_;
  int consecutive_skips_ = 0;
};

// A fault asked for must happen: one planned past the run's end, or at a checkpoint the run never
// writes, would let a test of failure handling pass without any failure.
void check_fault_fires(const TrainConfig& c, std::uint64_t steps_total) {
  const std::optional<FaultPlan> fault = parse_fault_plan(c.inject_fault);
  if (!fault) return;
  if (fault->kind != FaultPlan::Kind::crash_checkpoint) {
    SPARSGD_ENFORCE(fault->iteration < steps_total, "--inject-fault " << c.inject_fault << " is planned at iteration "
                                                        << fault->iteration << ", but the run's iterations are 0 to "
                                                        << steps_total - 1 << ": it would never happen");
    return;
  }
  SPARSGD_ENFORCE(c.checkpoint_every > 0, "--inject-fault " << c.inject_fault << " crashes while a checkpoint is written, "
                                                                "and this run writes none: add --checkpoint-every N");
  const auto every = static_cast<std::uint64_t>(c.checkpoint_every);
  const std::uint64_t first = std::max<std::uint64_t>(every, (fault->iteration + every - 1) / every * every);
  SPARSGD_ENFORCE(first < steps_total, "--inject-fault " << c.inject_fault << " crashes at the first checkpoint at or "
                                           "after iteration " << fault->iteration << ", but this run writes its last "
                                           "at iteration " << (steps_total - 1) / every * every
                                           << " (every " << every << " of its " << steps_total
                                           << " iterations): it would never happen");
}

// What the data allows and the machine holds, checked before any worker starts: a batch larger
// than a worker's shard would silently train on the shard instead, and a run that cannot fit in
// memory would be killed by the kernel mid-run with no word.
MemoryUse check_run_fits(const TrainConfig& c, const Task& task, int workers, int workers_here) {
  task.check_fits(workers);
  const std::uint64_t steps_total = iterations_in_run(c, task.iterations_per_epoch(workers));
  // A checkpoint is written after iteration S when S is a multiple of N and not the run's last.
  SPARSGD_ENFORCE(static_cast<std::uint64_t>(c.checkpoint_every) < steps_total,
                  "--checkpoint-every " << c.checkpoint_every << " is more than the run's " << steps_total
                                        << " iterations less one: no checkpoint would ever be written (none is "
                                           "written after the last); use at most "
                                        << steps_total - 1);
  check_fault_fires(c, steps_total);
  const std::int64_t parameters = task.parameter_count();
  const ActivationEstimate activations = task.activation_memory(workers);
  const MemoryEstimate estimate = train_memory_estimate(
      {parameters, activations.bytes, activations.described, workers, workers_here, c.exchange.aggregator,
       compress::find_compressor(c.exchange.compressor).properties.dense,
       std::min(1.0, std::max(c.exchange.density, c.warmup_density)), c.optimizer});
  MemoryUse use;
  use.estimate_bytes = estimate.total();
  use.resident_before_bytes = resident_bytes();
  require_memory("train", estimate, "lower --batch-size or --workers, or use a smaller --model");
  return use;
}

// LibTorch's errors carry a C++ stack trace in what(); what went wrong is the user's model or data,
// and its first lines are what they need.
template <typename Body>
auto without_torch_backtrace(Body&& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    throw InvalidData(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

// Everything before the workers start: options, threads, the task's data, the fit.
struct Prepared {
  TrainConfig config;
  std::unique_ptr<Task> task;
  MemoryUse memory;
};

Prepared prepare(const TrainConfig& given, int workers, int workers_here) {
  Prepared p{with_task_defaults(given), nullptr, {}};
  use_one_thread_per_worker();
  without_torch_backtrace([&] {
    p.task = load_task(p.config);
    p.memory = check_run_fits(p.config, *p.task, workers, workers_here);
  });
  return p;
}

}  // namespace

void use_one_thread_per_worker() {
  torch::set_num_threads(1);
  // OpenBLAS keeps its own pool: looked up at run time, since whether LibTorch's BLAS is OpenBLAS
  // depends on the LibTorch (the PyPI wheel's is MKL, inside libtorch_cpu; distributions' may be OpenBLAS).
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
}

MemoryEstimate train_memory_estimate(const TrainMemoryInputs& in) {
  constexpr double kMiB = 1 << 20;
  const auto n = static_cast<std::size_t>(in.parameters);
  const std::size_t k = k_from_density(n, in.density);
  collectives::Footprint exchange = collectives::find_aggregator(in.aggregator).worker_memory;
  if (in.dense_compressor) exchange.pairs = exchange.pairs_per_worker = 0.0;  // no selection: arrays only
  // Training holds the aggregate while the optimizer takes it in, which bench comm's footprints,
  // fitted to the exchange alone, do not count: a quarter more (allgather at P = 256, where the
  // gathered pairs are most of it, used 7.29 GiB against 7.31 estimated without it).
  constexpr double kHeldAggregate = 1.25;
  // Weights and gradients, the averager's flat gradient and average, the optimizer's state
  // (momentum and momentum correction's velocity; Adam's two moments and its step's temporaries).
  const double model_arrays = in.optimizer == "sgd" ? 6.0 : 7.0;
  // A thread's stack and allocator arena as resident (what it touches), not as reserved (8 MiB and
  // 64 MiB of address space): 1024 threads hold a few MiB each.
  constexpr double kThread = 2 * kMiB;
  const double per_worker = in.activation_bytes + model_arrays * 4.0 * static_cast<double>(n) +
                            kHeldAggregate * exchange.bytes(n, k, in.workers) + kThread;
  MemoryEstimate estimate;
  estimate.add(std::to_string(in.workers_here) + (in.workers_here == 1 ? " worker" : " workers") + " x (" +
                   in.activations_described + ", the model's and optimizer's arrays, " + in.aggregator +
                   "'s buffers, thread)",
               in.workers_here * per_worker + exchange.shared_bytes(n));
  estimate.add("allocator", 48 * kMiB);
  return estimate;
}

// The run directory, claimed before anything else is done (rank 0's, under MPI): a second run on it
// fails at once, and a finished run is replaced only when asked.
std::unique_ptr<RunDirectoryClaim> claim_run_directory(const TrainConfig& config) {
  std::error_code ec;
  // Before the claim creates anything: a resume of a directory that is not there is a typo.
  if (!config.resume_dir.empty() && !fs::is_directory(config.resume_dir, ec)) {
    throw InvalidArgument("--resume " + config.resume_dir + ": no such run directory");
  }
  if (config.out_dir.empty()) return nullptr;
  const bool continuing = !config.resume_dir.empty() && fs::exists(config.out_dir, ec) &&
                          fs::equivalent(config.resume_dir, config.out_dir, ec);
  return std::make_unique<RunDirectoryClaim>(config.out_dir, continuing, config.overwrite);
}

TrainSummary train(const TrainConfig& config, TrainObserver* observer) {
  const auto claim = claim_run_directory(config);
  const Prepared prepared = prepare(config, config.workers, config.workers);
  TrainSummary summary;
  std::mutex summary_mutex;
  transport::run_local_workers(
      config.workers,
      [&](transport::Transport& t) {
        TrainSummary mine = without_torch_backtrace(
            [&] { return TrainingRun(t, prepared.config, *prepared.task, observer, prepared.memory).run(); });
        if (t.rank() == 0) {
          std::lock_guard lock(summary_mutex);
          summary = std::move(mine);
        }
      },
      std::chrono::milliseconds(config.timeout_ms));
  return summary;
}

TrainSummary train_worker(transport::Transport& transport, const TrainConfig& config, TrainObserver* observer,
                          int workers_on_this_machine) {
  const auto claim = transport.rank() == 0 ? claim_run_directory(config) : nullptr;
  const Prepared prepared =
      prepare(config, transport.size(), std::clamp(workers_on_this_machine, 1, transport.size()));
  return without_torch_backtrace(
      [&] { return TrainingRun(transport, prepared.config, *prepared.task, observer, prepared.memory).run(); });
}

}  // namespace sparsgd::torch_layer
