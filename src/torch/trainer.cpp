#include "sparsgd/torch/trainer.hpp"

#include <dlfcn.h>
#include <torch/torch.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <limits>
#include <numbers>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "sparsgd/collectives/agreement.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/bookkeeping.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/checkpoint.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/fault_plan.hpp"
#include "sparsgd/core/file_io.hpp"
#include "sparsgd/core/memory.hpp"
#include "sparsgd/core/stop_request.hpp"
#include "sparsgd/torch/distributed_optimizer.hpp"
#include "sparsgd/torch/training_optimizer.hpp"
#include "sparsgd/torch/fashion_mnist.hpp"
#include "sparsgd/torch/models.hpp"
#include "sparsgd/torch/sharding.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Data {
  Dataset train;
  Dataset test;
};

// torch::manual_seed sets one process-wide generator: models are built one at a time under it so
// that rank 0's initial parameters do not depend on thread timing.
std::mutex model_init_mutex;

double learning_rate(const TrainConfig& c, int workers, double epoch_position) {
  double lr = c.lr;
  if (c.lr_schedule == "step") {
    if (epoch_position >= 0.75 * c.epochs) {
      lr *= 0.01;
    } else if (epoch_position >= 0.5 * c.epochs) {
      lr *= 0.1;
    }
  } else if (c.lr_schedule == "cosine") {
    lr *= 0.5 * (1.0 + std::cos(std::numbers::pi * epoch_position / c.epochs));
  }
  if (c.warmup_epochs > 0.0 && epoch_position < c.warmup_epochs) {
    // From lr/P to lr, as in the gTop-k paper.
    const double start = lr / workers;
    lr = start + (lr - start) * epoch_position / c.warmup_epochs;
  }
  return lr;
}

double density_for_epoch(const TrainConfig& c, int epoch) {
  return epoch == 0 && c.warmup_density > 0.0 ? c.warmup_density : c.density;
}

// What must match between a checkpointed run and its resumption.
std::string fingerprint(const TrainConfig& c, int workers) {
  std::ostringstream os;
  os << c.model << '|' << c.compressor << '|' << c.r_factor << '|' << c.aggregator << '|' << c.density << '|'
     << c.warmup_density << '|' << c.epochs << '|' << c.batch_size << '|' << c.lr << '|' << c.momentum << '|'
     << c.nesterov << '|' << c.weight_decay << '|' << c.warmup_epochs << '|' << c.lr_schedule << '|'
     << c.momentum_correction << '|' << c.per_layer << '|' << c.network << '|' << c.seed << '|' << workers;
  // Runs of the momentum SGD keep the fingerprint they had before other optimizers existed.
  if (c.optimizer != "sgd") os << '|' << c.optimizer;
  return os.str();
}

// Everything that must be the same on every rank, named as the CLI names it. Not --workers (one
// worker per rank under MPI) and not --data (a path on each host).
collectives::ConfigFields run_config_fields(const TrainConfig& c) {
  using collectives::field_value;
  return {{"--model", c.model},
          {"--compressor", c.compressor},
          {"--r-factor", field_value(c.r_factor)},
          {"--aggregator", c.aggregator},
          {"--density", field_value(c.density)},
          {"--warmup-density", field_value(c.warmup_density)},
          {"--epochs", std::to_string(c.epochs)},
          {"--batch-size", std::to_string(c.batch_size)},
          {"--lr", field_value(c.lr)},
          {"--optimizer", c.optimizer},
          {"--momentum", field_value(c.momentum)},
          {"--nesterov", c.nesterov ? "on" : "off"},
          {"--weight-decay", field_value(c.weight_decay)},
          {"--warmup-epochs", field_value(c.warmup_epochs)},
          {"--lr-schedule", c.lr_schedule},
          {"--momentum-correction", c.momentum_correction ? "on" : "off"},
          {"--per-layer", c.per_layer ? "on" : "off"},
          {"--network", c.network},
          {"--seed", std::to_string(c.seed)},
          {"--out", c.out_dir},
          {"--checkpoint-every", std::to_string(c.checkpoint_every)},
          {"--resume", c.resume_dir},
          {"--max-iters", std::to_string(c.max_iters)},
          {"--timeout-ms", std::to_string(c.timeout_ms)},
          {"--on-nonfinite", c.on_nonfinite},
          {"--inject-fault", c.inject_fault}};
}

std::vector<torch::Tensor> float_buffers(Classifier& model) {
  std::vector<torch::Tensor> out;
  for (auto& b : model.buffers()) {
    if (b.scalar_type() == torch::kFloat32) out.push_back(b);
  }
  return out;
}

std::vector<double> flatten(const std::vector<EpochResult>& history) {
  std::vector<double> out;
  for (const auto& e : history) {
    out.insert(out.end(), {static_cast<double>(e.epoch), static_cast<double>(e.iterations), e.train_loss, e.test_loss,
                           e.test_accuracy, e.wall_seconds, e.simulated_seconds, e.bytes_per_iteration});
  }
  return out;
}

std::vector<EpochResult> unflatten(const std::vector<double>& v) {
  std::vector<EpochResult> out;
  for (std::size_t i = 0; i + 8 <= v.size(); i += 8) {
    out.push_back({static_cast<int>(v[i]), static_cast<std::uint64_t>(v[i + 1]), v[i + 2], v[i + 3], v[i + 4], v[i + 5],
                   v[i + 6], v[i + 7]});
  }
  return out;
}

const char* kMetricsHeader =
    "epoch,step,loss,lr,density,bytes_sent,compute_s,compression_s,communication_s,simulated_s,wall_s\n";
const char* kEpochsHeader = "epoch,iterations,train_loss,test_loss,test_accuracy,wall_s,simulated_s,bytes_per_iteration\n";

// On resume: the rows of the earlier run's metrics.csv up to the checkpoint's own step, in a
// file written whole (the old one may be the same file). Rows after the checkpoint are dropped
// (the resumed run writes them again) and so is a torn or damaged line, such as the half row a
// SIGKILL leaves at the end: the metrics were made durable before each checkpoint was written,
// so every row the checkpoint covers is complete.
void restart_metrics(const fs::path& from, const fs::path& to, std::uint64_t last_step) {
  std::string kept = kMetricsHeader;
  if (std::ifstream in(from); in) {
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (in.eof()) break;  // no newline: torn
      if (std::count(line.begin(), line.end(), ',') != 10) continue;
      const auto comma = line.find(',');
      const auto next = line.find(',', comma + 1);
      std::uint64_t row_step = 0;
      const auto [end, error] = std::from_chars(line.data() + comma + 1, line.data() + next, row_step);
      if (error != std::errc() || end != line.data() + next) continue;
      if (row_step <= last_step) kept += line + '\n';
    }
  }
  write_file_atomically(to, kept);
}

void write_epochs(const fs::path& path, const std::vector<EpochResult>& history) {
  std::ostringstream out;
  out << kEpochsHeader;
  for (const auto& e : history) {
    out << e.epoch << ',' << e.iterations << ',' << e.train_loss << ',' << e.test_loss << ',' << e.test_accuracy << ','
        << e.wall_seconds << ',' << e.simulated_seconds << ',' << e.bytes_per_iteration << '\n';
  }
  write_file_atomically(path, out.str());
}

struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;
};

Evaluation evaluate(transport::Transport& base, Classifier& model, FlatParameters& buffers, const Dataset& test) {
  const int p = base.size();
  // Batch-norm statistics differ between workers (each saw its own batches): use their mean.
  if (buffers.size() > 0) {
    std::vector<float> mine(buffers.size());
    buffers.gather_values(mine);
    std::vector<double> sum(mine.begin(), mine.end());
    collectives::allreduce_sum(base, sum);
    std::vector<float> mean(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / p);
    buffers.scatter_values(mean);
  }
  torch::NoGradGuard no_grad;
  model.eval();
  const auto [begin, end] = shard_range(static_cast<std::size_t>(test.size()), p, base.rank());
  double totals[3] = {0.0, 0.0, 0.0};  // loss sum, correct, count
  constexpr std::int64_t kBatch = 1000;
  for (auto lo = static_cast<std::int64_t>(begin); lo < static_cast<std::int64_t>(end); lo += kBatch) {
    const std::int64_t hi = std::min<std::int64_t>(lo + kBatch, static_cast<std::int64_t>(end));
    const auto x = test.images.slice(0, lo, hi);
    const auto y = test.labels.slice(0, lo, hi);
    const auto logits = model.forward(x);
    totals[0] += torch::nn::functional::cross_entropy(
                     logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    totals[1] += logits.argmax(1).eq(y).sum().item<double>();
    totals[2] += static_cast<double>(hi - lo);
  }
  collectives::allreduce_sum(base, totals);
  model.train();
  return {totals[0] / totals[2], totals[1] / totals[2]};
}

// What every rank resumes from: the newest iteration for which every rank holds a complete
// checkpoint. A rank keeps its last two (rank-R.ckpt, rank-R.prev.ckpt), so a run killed while
// some ranks had written iteration S and others not yet still resumes, from the iteration before.
struct ResumePoint {
  Checkpoint checkpoint;
  std::string warning;  // set when this rank had to pass over a damaged or missing newest file
};

void note_problem(std::string& problems, const char* what) {
  if (!problems.empty()) problems.append("; ");
  problems.append(what);
}

// A rank's checkpoint file in DIR/checkpoints, or the one it replaced.
std::string checkpoint_file(int rank, bool previous) {
  return "rank-" + std::to_string(rank) + (previous ? ".prev.ckpt" : ".ckpt");
}

ResumePoint agree_on_resume_point(transport::Transport& base, const TrainConfig& c,
                                  const std::string& expected_fingerprint) {
  const int p = base.size();
  const int rank = base.rank();
  const fs::path dir = fs::path(c.resume_dir) / "checkpoints";
  const std::string files[2] = {checkpoint_file(rank, false), checkpoint_file(rank, true)};
  std::vector<std::pair<std::uint64_t, Checkpoint>> usable;
  std::string problems;
  for (const auto& file : files) {
    const std::string path = (dir / file).string();
    if (file == files[1] && !fs::exists(path)) continue;  // a run's first checkpoint has no predecessor
    try {
      Checkpoint ckpt = read_checkpoint(path);
      if (ckpt.text_section("config") != expected_fingerprint) {
        throw InvalidArgument("the checkpoint in " + c.resume_dir +
                              " was written with other training options (model, method, schedule, seed or workers): "
                              "resume with the options of the original run");
      }
      const auto& identity = ckpt.integer_section("identity");
      if (identity.size() != 2 || identity[0] != static_cast<std::uint64_t>(rank) ||
          identity[1] != static_cast<std::uint64_t>(p)) {
        throw InvalidArgument(
            path + " is not rank " + std::to_string(rank) + "'s state" +
            (identity.size() == 2 ? " (it was written by rank " + std::to_string(identity[0]) + " of " +
                                        std::to_string(identity[1]) + ")"
                                  : " (its identity section is malformed)") +
            ": checkpoint files swapped or copied between ranks? Put each rank-R file back where rank R wrote it");
      }
      const auto& position = ckpt.integer_section("position");
      SPARSGD_ENFORCE_EQ(position.size(), std::size_t{4}, "checkpoint position is malformed");
      usable.emplace_back(position[2], std::move(ckpt));
    } catch (const InvalidData& e) {
      note_problem(problems, e.what());
    } catch (const InvalidArgument& e) {
      if (fs::exists(path)) throw;  // options that do not match: no other checkpoint can help
      note_problem(problems, e.what());
    }
  }
  // Every rank learns every rank's iterations (two slots each, 0 for none, else iteration + 1).
  std::vector<double> slots(2 * static_cast<std::size_t>(p), 0.0);
  for (std::size_t i = 0; i < usable.size(); ++i) {
    slots[2 * static_cast<std::size_t>(rank) + i] = static_cast<double>(usable[i].first) + 1.0;
  }
  collectives::allreduce_sum(base, slots);
  const auto slot = [&slots](int r, int i) { return slots[2 * static_cast<std::size_t>(r) + static_cast<std::size_t>(i)]; };
  std::optional<std::uint64_t> common;
  std::ostringstream held;
  for (int r = 0; r < p; ++r) {
    held << (r ? "; " : "") << "rank " << r << ":";
    for (int i = 0; i < 2; ++i) {
      if (slot(r, i) > 0) held << ' ' << static_cast<std::uint64_t>(slot(r, i) - 1);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const double candidate = slot(0, i);
    if (candidate <= 0) continue;
    bool everywhere = true;
    for (int r = 1; r < p && everywhere; ++r) everywhere = slot(r, 0) == candidate || slot(r, 1) == candidate;
    if (everywhere && (!common || static_cast<std::uint64_t>(candidate - 1) > *common)) {
      common = static_cast<std::uint64_t>(candidate - 1);
    }
  }
  if (!common) {
    std::ostringstream message;
    message << "cannot resume from " << c.resume_dir << " with " << p
            << " workers: no iteration has a complete checkpoint on every rank (iterations held: " << held.str() << ")";
    if (!problems.empty()) message << "; rank " << rank << ": " << problems;
    throw InvalidData(message.str());
  }
  ResumePoint point;
  for (auto& [iteration, ckpt] : usable) {
    if (iteration == *common) point.checkpoint = std::move(ckpt);
  }
  if (!problems.empty() || usable.front().first != *common) {
    std::ostringstream warning;
    warning << "rank " << rank << " resumes from its previous checkpoint (iteration " << *common << ")";
    if (problems.empty()) {
      warning << ", the newest that every rank holds";
    } else {
      warning << ": " << problems;
    }
    point.warning = warning.str();
  }
  return point;
}

// Where an injected fault strikes; see sparsgd/core/fault_plan.hpp.
void inject_gradient_fault(const FaultPlan& fault, std::vector<torch::Tensor>& parameters) {
  for (auto& parameter : parameters) {
    if (!parameter.grad().defined() || parameter.grad().numel() == 0) continue;
    parameter.mutable_grad().view({-1})[0] = fault.kind == FaultPlan::Kind::nan
                                                 ? std::numeric_limits<float>::quiet_NaN()
                                                 : std::numeric_limits<float>::infinity();
    return;
  }
}

[[noreturn]] void crash_while_writing(const std::string& path, const Checkpoint& ckpt) {
  const std::string bytes = encode_checkpoint(ckpt);
  if (std::FILE* torn = std::fopen((path + ".tmp").c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size() / 2, torn);
    std::fclose(torn);
  }
  std::fprintf(stderr, "sparsgd: injected fault: dying while writing %s\n", path.c_str());
  std::fflush(stderr);
  std::_Exit(kCrashCheckpointExitStatus);
}

// Iterations the whole run takes: its epochs, cut at --max-iters if that is given.
std::uint64_t iterations_in_run(const TrainConfig& c, std::size_t per_epoch) {
  const std::uint64_t all = per_epoch * static_cast<std::uint64_t>(c.epochs);
  return c.max_iters > 0 ? std::min<std::uint64_t>(all, c.max_iters) : all;
}

TrainSummary run_worker(transport::Transport& base, const TrainConfig& c, const Data& data, TrainObserver* observer,
                        const MemoryUse& memory_plan) {
  const int p = base.size();
  const int rank = base.rank();
  const bool reporter = rank == 0;
  // Before anything else goes over the wire: ranks launched with different options would train
  // silently apart, or wait for messages that never come.
  collectives::check_ranks_agree(base, run_config_fields(c), "the training options");
  const auto start = Clock::now();
  const transport::NetworkSpec network = transport::parse_network(c.network);
  const std::optional<FaultPlan> fault = parse_fault_plan(c.inject_fault);
  SPARSGD_ENFORCE(!fault || fault->rank < p,
                  "--inject-fault names rank " << (fault ? fault->rank : 0) << " but there are " << p << " workers");
  std::optional<transport::SimulatedNetwork> simulated;
  if (network.enabled()) simulated.emplace(base, network);
  transport::Transport& comm = simulated ? static_cast<transport::Transport&>(*simulated) : base;

  std::shared_ptr<Classifier> model;
  {
    std::lock_guard lock(model_init_mutex);
    torch::manual_seed(c.seed);
    model = make_model(c.model);
  }
  std::vector<torch::Tensor> parameters;
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) {
    names.push_back(item.key());
    parameters.push_back(item.value());
  }
  FlatParameters buffers(float_buffers(*model));  // batch-norm statistics
  collectives::ExchangeConfig exchange;
  exchange.compressor = {c.compressor, c.r_factor, c.seed, c.aggregator == "randk-shared"};
  exchange.aggregator = c.aggregator;
  exchange.density = density_for_epoch(c, 0);
  SgdConfig sgd{c.momentum, c.nesterov, c.weight_decay, c.momentum_correction, c.per_layer, c.on_nonfinite == "skip"};
  const std::unique_ptr<TrainingOptimizer> optimizer_owner =
      make_training_optimizer(c.optimizer, comm, parameters, names, exchange, sgd);
  TrainingOptimizer& optimizer = *optimizer_owner;
  {
    // Identical initial parameters everywhere: rank 0's. Setup, not training: not on the clock.
    std::vector<float> values(optimizer.size());
    optimizer.flat().gather_values(values);
    collectives::broadcast(base, values, 0);
    optimizer.flat().scatter_values(values);
  }

  const auto n_train = static_cast<std::size_t>(data.train.size());
  const std::size_t per_epoch = iterations_per_epoch(n_train, p, static_cast<std::size_t>(c.batch_size));
  const std::uint64_t steps_total = iterations_in_run(c, per_epoch);

  TrainSummary summary;
  summary.model = c.model;
  summary.compressor = c.compressor;
  summary.optimizer = c.optimizer;
  summary.aggregator = c.aggregator;
  summary.network = network.name;
  summary.r_factor = c.compressor == "rtopk" ? c.r_factor : 0.0;
  summary.parameters = parameter_count(*model);
  summary.workers = p;
  summary.epochs = c.epochs;
  summary.density = c.density;

  // Position and running totals; restored from a checkpoint when resuming.
  int start_epoch = 0;
  std::uint64_t start_iteration = 0, step = 0;
  double epoch_loss_sum = 0.0, epoch_batches = 0.0, wall_before = 0.0;
  std::uint64_t bytes_total = 0;
  std::vector<EpochResult> history;
  const fs::path out_dir = c.out_dir;
  const std::string rank_file = checkpoint_file(rank, false);
  const std::string previous_rank_file = checkpoint_file(rank, true);
  if (!c.resume_dir.empty()) {
    const ResumePoint point = agree_on_resume_point(base, c, fingerprint(c, p));
    if (!point.warning.empty()) std::fprintf(stderr, "sparsgd: warning: %s\n", point.warning.c_str());
    const Checkpoint& ckpt = point.checkpoint;
    std::vector<float> values = ckpt.float_section("parameters");
    SPARSGD_ENFORCE_EQ(values.size(), optimizer.size(), "checkpoint parameters do not fit the model");
    optimizer.flat().scatter_values(values);
    buffers.scatter_values(ckpt.float_section("buffers"));
    optimizer.load(ckpt);
    const auto& position = ckpt.integer_section("position");
    SPARSGD_ENFORCE_EQ(position.size(), std::size_t{4}, "checkpoint position is malformed");
    start_epoch = static_cast<int>(position[0]);
    start_iteration = position[1];
    step = position[2];
    bytes_total = position[3];
    const auto& totals = ckpt.double_section("totals");
    SPARSGD_ENFORCE_EQ(totals.size(), std::size_t{7}, "checkpoint totals are malformed");
    epoch_loss_sum = totals[0];
    epoch_batches = totals[1];
    wall_before = totals[2];
    summary.compute_seconds = totals[3];
    summary.compression_seconds = totals[4];
    summary.communication_seconds = totals[5];
    if (simulated) simulated->set_clock(totals[6]);
    history = unflatten(ckpt.double_section("history"));
    summary.resumed = true;
    summary.resumed_at = step;
    // Before anything is written: a shorter run resumed from a longer one's checkpoint would
    // rewrite that run's summary and drop its rows.
    if (step > steps_total) {
      throw InvalidArgument("the checkpoints in " + c.resume_dir + " are at iteration " + std::to_string(step) +
                            ", beyond the " + std::to_string(steps_total) +
                            " iterations of this run (--max-iters, --epochs): resuming would rewrite a longer run's "
                            "results; resume with that run's --max-iters and --epochs");
    }
  }
  std::optional<AppendFile> metrics;
  if (reporter && !out_dir.empty()) {
    fs::create_directories(out_dir);
    if (summary.resumed) {
      restart_metrics(fs::path(c.resume_dir) / "metrics.csv", out_dir / "metrics.csv", step);
    } else {
      write_file_atomically(out_dir / "metrics.csv", kMetricsHeader);
    }
    metrics.emplace(out_dir / "metrics.csv");
  }
  if (reporter && observer) observer->on_start(summary, steps_total);

  std::optional<std::uint64_t> last_checkpoint;
  fs::path last_checkpoint_run = out_dir;
  if (summary.resumed) {
    last_checkpoint = step;
    last_checkpoint_run = c.resume_dir;
  }
  auto save_checkpoint = [&](int epoch, std::uint64_t next_iteration) {
    // Every row the checkpoint covers is on disk before the checkpoint is.
    if (metrics) metrics->durable();
    Checkpoint ckpt;
    ckpt.texts["config"] = fingerprint(c, p);
    // Whose state this is: a file copied or swapped to another rank must not resume silently.
    ckpt.integers["identity"] = {static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(p)};
    std::vector<float> values(optimizer.size());
    optimizer.flat().gather_values(values);
    ckpt.floats["parameters"] = std::move(values);
    std::vector<float> buffer_values(buffers.size());
    buffers.gather_values(buffer_values);
    ckpt.floats["buffers"] = std::move(buffer_values);
    optimizer.save(ckpt);
    ckpt.integers["position"] = {static_cast<std::uint64_t>(epoch), next_iteration, step, bytes_total};
    ckpt.doubles["totals"] = {epoch_loss_sum,
                              epoch_batches,
                              wall_before + std::chrono::duration<double>(Clock::now() - start).count(),
                              summary.compute_seconds,
                              summary.compression_seconds,
                              summary.communication_seconds,
                              simulated ? simulated->now() : 0.0};
    ckpt.doubles["history"] = flatten(history);
    const fs::path dir = out_dir / "checkpoints";
    fs::create_directories(dir);
    if (fault && fault->kind == FaultPlan::Kind::crash_checkpoint && rank == fault->rank && step >= fault->iteration) {
      crash_while_writing((dir / rank_file).string(), ckpt);
    }
    write_checkpoint((dir / rank_file).string(), ckpt, (dir / previous_rank_file).string());
    last_checkpoint = step;
    last_checkpoint_run = out_dir;
    if (simulated) simulated->discard_compute();
  };
  // SIGINT or SIGTERM (when the program installed the handlers): stop between iterations, with
  // the rows so far on disk, saying what can be resumed.
  auto stop_if_asked = [&] {
    const int signal = stop_requested();
    if (signal == 0) return;
    if (metrics) metrics->durable();
    std::string message = "interrupted by " + signal_name(signal) + " after iteration " + std::to_string(step) + "; ";
    if (!last_checkpoint) {
      message += c.checkpoint_every > 0 ? "no checkpoint was written yet: nothing to resume from"
                                        : "no checkpoints (--checkpoint-every 0): nothing to resume from";
    } else {
      // This rank's; the others may be a checkpoint ahead or behind, and a resume starts from the
      // newest iteration that every rank holds.
      message += "rank " + std::to_string(rank) + "'s newest checkpoint is at iteration " +
                 std::to_string(*last_checkpoint) + " in " + (last_checkpoint_run / "checkpoints").string() +
                 ": continue with the same options and --resume " + last_checkpoint_run.string();
    }
    throw Interrupted(message, signal);
  };

  bool stopped = false;
  int consecutive_skips = 0;
  for (int epoch = start_epoch; epoch < c.epochs && !stopped; ++epoch) {
    const std::vector<std::uint32_t> order = epoch_permutation(n_train, c.seed, static_cast<std::uint64_t>(epoch));
    const auto [shard_begin, shard_end] = shard_range(n_train, p, rank);
    optimizer.set_density(density_for_epoch(c, epoch));
    const std::uint64_t first = epoch == start_epoch ? start_iteration : 0;
    if (epoch != start_epoch || start_iteration == 0) {
      epoch_loss_sum = 0.0;
      epoch_batches = 0.0;
    }
    for (std::uint64_t it = first; it < per_epoch; ++it) {
      if (step >= steps_total) {
        stopped = true;
        break;
      }
      stop_if_asked();
      const std::size_t lo = std::min(shard_end, shard_begin + it * static_cast<std::size_t>(c.batch_size));
      const std::size_t hi = std::min(shard_end, lo + static_cast<std::size_t>(c.batch_size));
      const double cpu_start = transport::thread_cpu_seconds();
      model->zero_grad();
      double loss_value = 0.0;
      if (hi > lo) {
        std::vector<std::int64_t> rows(order.begin() + static_cast<std::ptrdiff_t>(lo),
                                       order.begin() + static_cast<std::ptrdiff_t>(hi));
        const auto index = torch::tensor(rows, torch::kInt64);
        const auto x = data.train.images.index_select(0, index);
        const auto y = data.train.labels.index_select(0, index);
        const auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();
        loss_value = loss.item<double>();
        if (fault && fault->at(rank, step)) {
          switch (fault->kind) {
            case FaultPlan::Kind::nan:
            case FaultPlan::Kind::inf: inject_gradient_fault(*fault, parameters); break;
            case FaultPlan::Kind::thrown:
              throw Error("injected fault: worker " + std::to_string(rank) + " failed at iteration " + std::to_string(step));
            case FaultPlan::Kind::hang: {
              // Silent until three timeouts have passed or (in-process) the others have given up.
              const auto until = Clock::now() + 3 * std::chrono::milliseconds(c.timeout_ms);
              while (Clock::now() < until && !base.aborted()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
              const std::string what = "worker " + std::to_string(rank) + " hung at iteration " + std::to_string(step);
              if (base.aborted()) throw transport::PeerFailed("injected fault: " + what + " until the others gave up");
              throw Error("injected fault: " + what);
            }
            case FaultPlan::Kind::crash_checkpoint: break;
          }
        }
        epoch_loss_sum += loss_value;
        epoch_batches += 1.0;
      }
      const double compute = transport::thread_cpu_seconds() - cpu_start;
      const double position = epoch + static_cast<double>(it) / static_cast<double>(per_epoch);
      const double lr = learning_rate(c, p, position);
      const StepStats stats = optimizer.step(step, lr);
      if (stats.skipped) {
        ++summary.skipped_steps;
        if (++consecutive_skips >= kMaxConsecutiveSkips) {
          throw InvalidData("gradients were non-finite for " + std::to_string(consecutive_skips) +
                            " iterations in a row (last: " + stats.skip_reason + "): the run has diverged; stopping");
        }
        if (stats.skip_reason.find("parameter") != std::string::npos) {
          std::fprintf(stderr, "sparsgd: warning: skipped iteration %llu: %s\n", static_cast<unsigned long long>(step),
                       stats.skip_reason.c_str());
        }
      } else {
        consecutive_skips = 0;
      }
      bytes_total += stats.bytes_sent;
      summary.compute_seconds += compute;
      summary.compression_seconds += stats.compress_cpu_seconds;
      summary.communication_seconds += stats.aggregate_wall_seconds;
      ++step;
      if (reporter) {
        IterationRecord record{epoch,
                               step,
                               steps_total,
                               loss_value,
                               lr,
                               optimizer.density(),
                               stats.bytes_sent,
                               compute,
                               stats.compress_cpu_seconds,
                               stats.aggregate_wall_seconds,
                               simulated ? simulated->now() : 0.0,
                               wall_before + std::chrono::duration<double>(Clock::now() - start).count()};
        if (metrics) {
          std::ostringstream row;
          row << record.epoch << ',' << record.step << ',' << record.loss << ',' << record.lr << ','
              << record.density << ',' << record.bytes_sent << ',' << record.compute_seconds << ','
              << record.compression_seconds << ',' << record.communication_seconds << ','
              << record.simulated_seconds << ',' << record.wall_seconds << '\n';
          metrics->append(row.str());
        }
        if (observer) observer->on_iteration(record);
      }
      if (c.checkpoint_every > 0 && step % static_cast<std::uint64_t>(c.checkpoint_every) == 0 && step < steps_total) {
        save_checkpoint(it + 1 == per_epoch ? epoch + 1 : epoch, it + 1 == per_epoch ? 0 : it + 1);
      }
    }
    // End of the epoch (or of the run): evaluate on the test set, off the simulated clock.
    if (simulated) simulated->discard_compute();
    const Evaluation eval = evaluate(base, *model, buffers, data.test);
    double totals[4] = {epoch_loss_sum, epoch_batches, static_cast<double>(bytes_total), static_cast<double>(step)};
    collectives::allreduce_sum(base, totals);
    EpochResult result;
    result.epoch = epoch;
    result.iterations = step;
    result.train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    result.test_loss = eval.loss;
    result.test_accuracy = eval.accuracy;
    result.wall_seconds = wall_before + std::chrono::duration<double>(Clock::now() - start).count();
    result.simulated_seconds = simulated ? simulated->now() : 0.0;
    result.bytes_per_iteration = totals[3] > 0 ? totals[2] / totals[3] : 0.0;  // = mean over workers
    history.push_back(result);
    if (simulated) simulated->discard_compute();
    if (reporter) {
      if (!out_dir.empty()) write_epochs(out_dir / "epochs.csv", history);
      if (observer) observer->on_epoch(result);
    }
  }

  summary.iterations = step;
  summary.history = history;
  if (!history.empty()) {
    summary.final_train_loss = history.back().train_loss;
    summary.final_test_loss = history.back().test_loss;
    summary.final_test_accuracy = history.back().test_accuracy;
    summary.bytes_per_iteration = history.back().bytes_per_iteration;
    summary.simulated_seconds = history.back().simulated_seconds;
  }
  summary.wall_seconds = wall_before + std::chrono::duration<double>(Clock::now() - start).count();
  if (metrics) metrics->durable();
  summary.memory = memory_plan;
  summary.memory.peak_resident_bytes = peak_resident_bytes();
  if (reporter && !out_dir.empty()) write_file_atomically(out_dir / "summary.json", to_json(summary) + '\n');
  return summary;
}

// One BLAS thread per worker: the workers are the parallelism, and OpenBLAS's own pool would
// oversubscribe the cores. Looked up at run time because the BLAS under LibTorch is chosen by
// Debian's alternatives (reference BLAS, OpenBLAS, ...), not at build time.
void limit_blas_threads() {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
}

Data load_data(const TrainConfig& c) { return {load_fashion_mnist(c.data_dir, true), load_fashion_mnist(c.data_dir, false)}; }

// What the data allows and the machine holds, checked before any worker starts: a batch larger
// than a worker's shard would silently train on the shard instead, and a run that cannot fit in
// memory would be killed by the kernel mid-run with no word.
MemoryUse check_run_fits(const TrainConfig& c, const Data& data, int workers, int workers_here) {
  const auto n_train = static_cast<std::size_t>(data.train.size());
  const auto [shard_begin, shard_end] = shard_range(n_train, workers, 0);  // shard 0 is a largest one
  const std::size_t shard = shard_end - shard_begin;
  SPARSGD_ENFORCE(shard >= 1, "--workers " << workers << " is more than the " << n_train << " training examples");
  SPARSGD_ENFORCE(static_cast<std::size_t>(c.batch_size) <= shard,
                  "--batch-size " << c.batch_size << " is more than a worker's shard (" << shard << " of the " << n_train
                                  << " training examples over " << workers << " workers): every step would use the "
                                     "whole shard instead; use at most "
                                  << shard);
  const std::uint64_t steps_total =
      iterations_in_run(c, iterations_per_epoch(n_train, workers, static_cast<std::size_t>(c.batch_size)));
  SPARSGD_ENFORCE(static_cast<std::uint64_t>(c.checkpoint_every) <= steps_total,
                  "--checkpoint-every " << c.checkpoint_every << " is more than the run's " << steps_total
                                        << " iterations: no checkpoint would ever be written; use at most "
                                        << steps_total);
  std::int64_t parameters = 0;
  {
    std::lock_guard lock(model_init_mutex);
    parameters = parameter_count(*make_model(c.model));
  }
  const MemoryEstimate estimate = train_memory_estimate(c, parameters, shard, workers_here);
  MemoryUse use;
  use.estimate_bytes = estimate.total();
  use.resident_before_bytes = resident_bytes();
  require_memory("train", estimate, "lower --batch-size or --workers, or use a smaller --model");
  return use;
}

}  // namespace

void validate(const TrainConfig& c) {
  SPARSGD_ENFORCE(c.workers >= 1 && c.workers <= 1024, "--workers must be in [1, 1024], got " << c.workers);
  const auto& models = model_names();
  SPARSGD_ENFORCE(std::find(models.begin(), models.end(), c.model) != models.end(),
                  "unknown model '" << c.model << "' (expected mlp, cnn or resnet20)");
  compress::make_compressor({c.compressor, c.r_factor, c.seed, false});
  collectives::make_aggregator(c.aggregator);
  validate_density(c.density);
  if (c.warmup_density != 0.0) validate_density(c.warmup_density);
  const auto& optimizers = training_optimizer_names();
  SPARSGD_ENFORCE(std::find(optimizers.begin(), optimizers.end(), c.optimizer) != optimizers.end(),
                  "unknown --optimizer '" << c.optimizer << "' (expected sgd, adam or adamw)");
  SPARSGD_ENFORCE(c.optimizer == "sgd" || (!c.momentum_correction && !c.nesterov),
                  "--momentum-correction and --nesterov belong to --optimizer sgd, not " << c.optimizer);
  SPARSGD_ENFORCE(c.epochs >= 1, "--epochs must be at least 1, got " << c.epochs);
  SPARSGD_ENFORCE(c.batch_size >= 1, "--batch-size must be at least 1, got " << c.batch_size);
  SPARSGD_ENFORCE(std::isfinite(c.lr) && c.lr > 0.0, "--lr must be a positive number, got " << c.lr);
  SPARSGD_ENFORCE(std::isfinite(c.momentum) && c.momentum >= 0.0 && c.momentum < 1.0,
                  "--momentum must be in [0, 1), got " << c.momentum);
  SPARSGD_ENFORCE(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0,
                  "--weight-decay must be >= 0, got " << c.weight_decay);
  SPARSGD_ENFORCE(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0.0,
                  "--warmup-epochs must be >= 0, got " << c.warmup_epochs);
  SPARSGD_ENFORCE(c.lr_schedule == "none" || c.lr_schedule == "step" || c.lr_schedule == "cosine",
                  "unknown --lr-schedule '" << c.lr_schedule << "' (expected none, step or cosine)");
  transport::parse_network(c.network);
  SPARSGD_ENFORCE(c.checkpoint_every >= 0, "--checkpoint-every must be >= 0, got " << c.checkpoint_every);
  SPARSGD_ENFORCE(c.checkpoint_every == 0 || !c.out_dir.empty(), "--checkpoint-every needs --out DIR");
  SPARSGD_ENFORCE(c.timeout_ms >= 1, "--timeout-ms must be at least 1");
  SPARSGD_ENFORCE(c.on_nonfinite == "stop" || c.on_nonfinite == "skip",
                  "unknown --on-nonfinite '" << c.on_nonfinite << "' (expected stop or skip)");
  parse_fault_plan(c.inject_fault);
  SPARSGD_ENFORCE(c.aggregator != "randk-shared" || c.compressor == "randk",
                  "the randk-shared aggregator needs the randk compressor");
}

MemoryEstimate train_memory_estimate(const TrainConfig& c, std::int64_t parameters, std::size_t shard_examples,
                                     int workers_here) {
  const ActivationMemory activations = activation_memory(c.model);
  constexpr double kEvalBatch = 1000;  // evaluate()'s batch
  const double batch = std::min<double>(c.batch_size, static_cast<double>(shard_examples));
  const double per_worker = batch * activations.train_bytes_per_example +
                            kEvalBatch * activations.eval_bytes_per_example +
                            16.0 * 4.0 * static_cast<double>(parameters) + 16.0 * (1 << 20);
  MemoryEstimate estimate;
  estimate.add(std::to_string(workers_here) + (workers_here == 1 ? " worker" : " workers") + " x (activations of a batch of " + std::to_string(static_cast<long long>(batch)) +
                   " and of an evaluation batch, parameter copies, thread)",
               workers_here * per_worker);
  estimate.add("allocator", 32.0 * (1 << 20));
  return estimate;
}

std::string to_json(const TrainSummary& s) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : s.history) {
    epochs.push_back({{"epoch", e.epoch},
                      {"iterations", e.iterations},
                      {"train_loss", e.train_loss},
                      {"test_loss", e.test_loss},
                      {"test_accuracy", e.test_accuracy},
                      {"wall_seconds", e.wall_seconds},
                      {"simulated_seconds", e.simulated_seconds},
                      {"bytes_per_iteration", e.bytes_per_iteration}});
  }
  std::string compressor = s.compressor;
  if (s.r_factor > 0.0) {
    std::ostringstream r;
    r << s.compressor << "(r=" << s.r_factor << "k)";
    compressor = r.str();
  }
  const nlohmann::json doc = {
      {"method", compressor + "+" + s.aggregator},
      {"r_factor", s.r_factor},
      {"model", s.model},
      {"optimizer", s.optimizer},
      {"parameters", s.parameters},
      {"compressor", s.compressor},
      {"aggregator", s.aggregator},
      {"network", s.network},
      {"workers", s.workers},
      {"epochs", s.epochs},
      {"iterations", s.iterations},
      {"density", s.density},
      {"final_train_loss", s.final_train_loss},
      {"final_test_loss", s.final_test_loss},
      {"final_test_accuracy", s.final_test_accuracy},
      {"bytes_per_worker_per_iteration", s.bytes_per_iteration},
      {"wall_seconds", s.wall_seconds},
      {"simulated_seconds", s.simulated_seconds},
      {"time_split_seconds",
       {{"compute", s.compute_seconds}, {"compression", s.compression_seconds}, {"communication", s.communication_seconds}}},
      {"resumed", s.resumed},
      {"resumed_at", s.resumed_at},
      {"skipped_steps", s.skipped_steps},
      {"memory",
       {{"estimate_bytes", s.memory.estimate_bytes},
        {"resident_before_bytes", s.memory.resident_before_bytes},
        {"peak_resident_bytes", s.memory.peak_resident_bytes}}},
      {"history", epochs}};
  return doc.dump();
}

TrainSummary train(const TrainConfig& config, TrainObserver* observer) {
  validate(config);
  // One intra-op thread per worker: the workers are the parallelism, and a fixed thread count
  // keeps the arithmetic identical between in-process and MPI runs.
  torch::set_num_threads(1);
  limit_blas_threads();
  const Data data = load_data(config);
  const MemoryUse memory = check_run_fits(config, data, config.workers, config.workers);
  TrainSummary summary;
  std::mutex summary_mutex;
  transport::run_local_workers(
      config.workers,
      [&](transport::Transport& t) {
        TrainSummary mine = run_worker(t, config, data, t.rank() == 0 ? observer : nullptr, memory);
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
  validate(config);
  torch::set_num_threads(1);
  limit_blas_threads();
  const Data data = load_data(config);
  const MemoryUse memory =
      check_run_fits(config, data, transport.size(), std::clamp(workers_on_this_machine, 1, transport.size()));
  return run_worker(transport, config, data, transport.rank() == 0 ? observer : nullptr, memory);
}

}  // namespace sparsgd::torch_layer
