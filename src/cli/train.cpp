// `sparsgd train`: data-parallel training of a task (Fashion-MNIST, CIFAR-10, a word-level language
// model) with sparse gradient exchange.
// In-process workers by default; one worker per rank under mpirun.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/exchange_options.hpp"
#include "cli/commands.hpp"
#include "cli/gnuplot.hpp"
#include "cli/mpi_job.hpp"
#include "cli/plots.hpp"
#include "cli/validators.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/stop_request.hpp"
#include "sparsgd/torch/trainer.hpp"

namespace sparsgd::cli {
namespace {

using torch_layer::EpochResult;
using torch_layer::IterationRecord;
using torch_layer::TrainConfig;
using torch_layer::TrainSummary;

// A progress bar with ETA on a terminal; plain lines otherwise. Epoch lines go to stdout unless
// the JSON summary owns stdout.
class Progress final : public torch_layer::TrainObserver {
 public:
  explicit Progress(bool json) : json_(json), tty_(isatty(STDERR_FILENO) != 0) {}

  void on_start(const TrainSummary& plan, std::uint64_t steps_total) override {
    steps_total_ = steps_total;
    perplexity_ = plan.metric == "perplexity";
    start_ = std::chrono::steady_clock::now();
    std::fprintf(stderr,
                 "training %s on %s (%lld parameters) on %d workers: %s + %s, density %g, network %s, %llu iterations\n",
                 plan.model.c_str(), plan.task.c_str(), static_cast<long long>(plan.parameters), plan.workers, plan.compressor.c_str(),
                 plan.aggregator.c_str(), plan.density, plan.network.c_str(),
                 static_cast<unsigned long long>(steps_total));
  }

  void on_iteration(const IterationRecord& r) override {
    compute_ += r.compute_seconds;
    compression_ += r.compression_seconds;
    communication_ += r.communication_seconds;
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && r.step != steps_total_) return;
    last_draw_ = now;
    const double done = steps_total_ ? static_cast<double>(r.step) / static_cast<double>(steps_total_) : 1.0;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? elapsed * (1.0 - done) / done : 0.0;
    const int width = 30;
    const int filled = static_cast<int>(done * width);
    std::fprintf(stderr, "\r[%s%s] %3.0f%% epoch %d loss %.4f lr %.4g ETA %4.0fs ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), 100.0 * done, r.epoch + 1, r.loss, r.lr, eta);
    std::fflush(stderr);
  }

  void on_epoch(const EpochResult& e) override {
    if (tty_) std::fprintf(stderr, "\r%80s\r", "");
    const std::string judged = perplexity_ ? fmt::format("test perplexity {:.2f} (next-word accuracy {:.2f}%)",
                                                         e.test_perplexity, 100.0 * e.test_accuracy)
                                           : fmt::format("test accuracy {:.2f}%", 100.0 * e.test_accuracy);
    const std::string line = fmt::format(
        "epoch {}: train loss {:.4f}, {}, {:.0f} bytes/worker/iteration; rank 0 time so far: "
        "compute {:.1f}s, compression {:.2f}s, communication {:.1f}s, real {:.1f}s, simulated {:.1f}s",
        e.epoch + 1, e.train_loss, judged, e.bytes_per_iteration, compute_, compression_, communication_,
        e.wall_seconds, e.simulated_seconds);
    std::fprintf(json_ ? stderr : stdout, "%s\n", line.c_str());
    std::fflush(json_ ? stderr : stdout);
  }

 private:
  bool json_;
  bool tty_;
  bool perplexity_ = false;
  std::uint64_t steps_total_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  double compute_ = 0.0, compression_ = 0.0, communication_ = 0.0;  // rank 0's running totals
};

std::string default_out_dir() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::string("runs/train-") + stamp;
}

void finish(const TrainConfig& config, const TrainSummary& summary, bool json) {
  if (!config.out_dir.empty()) {
    try {
      const PlotsWritten plots = write_plots({config.out_dir}, config.out_dir);
      std::fprintf(stderr, "wrote %s/{metrics.csv,epochs.csv,summary.json} and %zu plots\n", config.out_dir.c_str(),
                   plots.files.size());
      for (const auto& why : plots.skipped) std::fprintf(stderr, "sparsgd: note: no plot %s\n", why.c_str());
    } catch (const GnuplotMissing& e) {
      std::fprintf(stderr, "wrote %s/{metrics.csv,epochs.csv,summary.json}; no plots: %s\n", config.out_dir.c_str(),
                   e.what());
    } catch (const InvalidData& e) {  // nothing finite to plot: the results themselves were written
      std::fprintf(stderr, "wrote %s/{metrics.csv,epochs.csv,summary.json}; no plots: %s\n", config.out_dir.c_str(),
                   e.what());
    }
  }
  if (json) std::printf("%s\n", torch_layer::to_json(summary).c_str());
}

void run_train(TrainConfig config, bool json, bool mpi, bool workers_given) {
  const bool default_out = config.out_dir.empty() && config.resume_dir.empty();
  if (config.out_dir.empty()) config.out_dir = config.resume_dir.empty() ? default_out_dir() : config.resume_dir;
  torch_layer::validate(config);
  // SIGINT/SIGTERM end the run between iterations, saying what was saved and how to resume.
  install_stop_handlers();
  Progress observer(json);
  if (!mpi) {
    finish(config, torch_layer::train(config, &observer), json);
    return;
  }
  run_mpi_job(std::chrono::milliseconds(config.timeout_ms), "train",
              workers_given ? std::optional<int>(config.workers) : std::nullopt, [&](transport::Transport& t) {
                // Ranks started a second apart would name different default directories: rank 0's.
                if (default_out) config.out_dir = collectives::broadcast_text(t, config.out_dir);
                const TrainSummary summary = torch_layer::train_worker(t, config, &observer, static_cast<int>(detect_mpi_launch().local_size));
                if (t.rank() == 0) finish(config, summary, json);
              });
}

}  // namespace

void register_train(CLI::App& app) {
  auto c = std::make_shared<TrainConfig>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("train", kTrainDescription);
  cmd->add_option("--workers", c->workers, "in-process workers (under mpirun: one per rank)")->capture_default_str();
  cmd->add_option("--task", c->task,
                  "fashion-mnist (Debian's dataset-fashion-mnist), cifar10 (the binary version's files in --data) or "
                  "lm (a word-level language model on train.txt, valid.txt, test.txt in --data). Each task trains "
                  "with its own recipe unless told otherwise: " + torch_layer::task_recipes_help())
      ->capture_default_str();
  cmd->add_option("--model", c->model,
                  "fashion-mnist: mlp, cnn (default) or resnet20; cifar10: resnet20 (default), vgg16, cnn or mlp; "
                  "lm: lstm (default); any task: a TorchScript file (*.pt, see examples/export_torchscript.py)")
      ->check(non_empty_path());
  cmd->add_option("--bptt", c->bptt, "lm: tokens per truncated-BPTT segment")->capture_default_str();
  cmd->add_option("--hidden-size", c->hidden_size, "lm: embedding and LSTM width (2 layers)")->capture_default_str();
  cmd->add_flag("--tied", c->tied, "lm: the decoder shares the embedding's weights");
  cmd->add_option("--dropout", c->dropout,
                  "lm: dropout on the embedding, between layers and before the decoder (default: the task's recipe)");
  cmd->add_option("--clip-norm", c->clip_norm,
                  "clip each worker's gradient to this L2 norm before the exchange (0: none; default: the task's "
                  "recipe)");
  cmd->add_option("--validation", c->validation,
                  "image tasks: hold out the last N training examples as a validation set, evaluated every epoch "
                  "(lm: valid.txt is)")
      ->capture_default_str();
  add_exchange_options(cmd, c->exchange);
  cmd->add_option("--warmup-density", c->warmup_density, "density during the first --warmup-density-epochs (0: none)")
      ->capture_default_str();
  cmd->add_option("--warmup-density-epochs", c->warmup_density_epochs,
                  "how long --warmup-density lasts, in epochs (fractions too: the gTop-k authors' 1 epoch of 141 is 0.0071 of the run)")
      ->capture_default_str();
  cmd->add_option("--epochs", c->epochs, "epochs")->capture_default_str();
  cmd->add_option("--batch-size", c->batch_size,
                  "batch size per worker (lm: parallel token streams per worker; default: the task's recipe)");
  cmd->add_option("--lr", c->lr, "learning rate (default: the task's recipe)");
  cmd->add_option("--optimizer", c->optimizer,
                  "sgd (momentum SGD, the gTop-k paper's), adam or adamw (torch::optim on the averaged gradients; "
                  "pass a smaller --lr, such as 0.001); default: the task's recipe");
  cmd->add_option("--momentum", c->momentum, "SGD momentum")->capture_default_str();
  cmd->add_flag("--nesterov", c->nesterov, "Nesterov momentum");
  cmd->add_option("--weight-decay", c->weight_decay, "weight decay (default: the task's recipe)");
  cmd->add_option("--warmup-epochs", c->warmup_epochs, "learning rate from lr/P to lr over these epochs")->capture_default_str();
  cmd->add_option("--lr-schedule", c->lr_schedule, "none, step or cosine")->capture_default_str();
  cmd->add_option("--momentum-correction", c->momentum_correction,
                  "DGC momentum correction: auto (on with --optimizer sgd where the exchange is sparse: it closes "
                  "the gap to dense S-SGD, docs/results/convergence.md; off where every entry is sent), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--per-layer", c->per_layer, "compress each layer on its own");
  cmd->add_option("--device", c->device,
                  "cpu, cuda (each worker a GPU in turn; under mpirun the GPU of its local rank) or cuda:N: where "
                  "forward, backward, selection and error feedback run (the exchange runs on the host)")
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed")->capture_default_str()->check(non_negative_integer());
  cmd->add_option("--out", c->out_dir, "run directory (default: runs/train-TIMESTAMP)")->check(non_empty_path());
  cmd->add_option("--checkpoint-every", c->checkpoint_every, "checkpoint every N iterations (0: never)")->capture_default_str();
  cmd->add_option("--resume", c->resume_dir, "continue the run whose checkpoints are in DIR")->check(non_empty_path());
  cmd->add_flag("--overwrite", c->overwrite,
                "replace the run that --out holds (its records, checkpoints and plots); without it such a directory "
                "is refused");
  cmd->add_option("--max-iters", c->max_iters, "stop after N iterations in all (0: no limit)")->check(non_negative_integer());
  cmd->add_option("--data", c->data_dir,
                  "the task's data directory (fashion-mnist: /usr/share/datasets/fashion-mnist by default; cifar10 "
                  "and lm: required)")
      ->check(non_empty_path());
  cmd->add_option("--timeout-ms", c->timeout_ms, "longest wait for a peer")->capture_default_str();
  cmd->add_option("--on-nonfinite", c->on_nonfinite,
                  "a NaN or Inf gradient: stop (naming iteration and parameter) or skip the step on every worker")
      ->capture_default_str();
  cmd->add_option("--inject-fault", c->inject_fault,
                  "for testing: KIND:RANK:ITERATION, KIND nan, inf, throw, hang or crash-checkpoint");
  cmd->add_flag("--json", *json, "print the summary as JSON on stdout at the end");
  cmd->callback([c, json, cmd] {
    torch_layer::apply_task_recipe(*c, [cmd](std::string_view flag) { return cmd->count(std::string(flag)) > 0; });
    run_train(*c, *json, detect_mpi_launch().launched, cmd->count("--workers") > 0);
  });
}

}  // namespace sparsgd::cli
