#pragma once
// The options of a training run (`sparsgd train`): the task and its data, the model, the gradient
// exchange, the optimizer and its schedules, run records and checkpoints. Torch-free, so that the
// CLI and other callers need no LibTorch includes.

#include <cstdint>
#include <functional>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "sparsgd/collectives/exchange_options.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"

namespace sparsgd::torch_layer {

// A training run's exchange unless told otherwise: density 0.01 on the gTop-k paper's cluster.
inline collectives::ExchangeOptions default_exchange() {
  collectives::ExchangeOptions exchange;
  exchange.density = 0.01;
  exchange.network = "paper-1gbe";
  return exchange;
}

struct TrainConfig {
  int workers = 4;                 // in-process workers (ignored under MPI: one per rank)
  // cpu, cuda or cuda:N (torch/worker_device.hpp): where forward, backward, the selection and
  // error feedback run; the exchange itself runs on the host.
  std::string device = "cpu";
  // What is trained on what (sparsgd/torch/task.hpp): fashion-mnist, cifar10 or lm.
  std::string task = "fashion-mnist";
  std::string data_dir;            // empty: the task's default (fashion-mnist: Debian's package)
  // A built-in model of the task (empty: the task's default) or a TorchScript file (*.pt).
  std::string model;
  // Language model (task lm): tokens per truncated-BPTT segment, LSTM width, input/output
  // embeddings tied, dropout between layers.
  int bptt = 35;
  int hidden_size = 200;
  bool tied = false;
  double dropout = 0.0;
  double clip_norm = 0.0;          // > 0: each worker's gradient clipped to this L2 norm before the exchange
  // Image tasks: the last N training examples held out as a validation set, evaluated every epoch
  // (for tuning; never the test set). 0: none. lm: valid.txt is the validation set.
  int validation = 0;
  // The gradient exchange (collectives/exchange_options.hpp), density 0.01 and the gTop-k paper's
  // 1 Gbps cluster by default; its network is also the one the run is simulated on.
  collectives::ExchangeOptions exchange = default_exchange();
  double warmup_density = 0.0;     // > 0: the density during the first warmup_density_epochs (gTop-k: 0.004)
  double warmup_density_epochs = 1.0;
  int epochs = 1;
  int batch_size = 32;             // per worker (lm: token streams per worker)
  double lr = 0.05;
  std::string optimizer = "sgd";    // sgd (momentum SGD below), adam, adamw (torch::optim)
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double warmup_epochs = 0.0;      // learning rate from lr/P to lr over these epochs
  std::string lr_schedule = "none";  // none, step (x0.1 at 50% and 75% of the epochs), cosine
  // DGC's momentum correction: auto (on with --optimizer sgd where the exchange is sparse; off with
  // adam and adamw, and where every entry is sent), on or off. On by default because it closes the
  // default run's gap to dense S-SGD (docs/results/convergence.md).
  std::string momentum_correction = "auto";
  bool per_layer = false;
  std::uint64_t seed = 1;
  std::string out_dir;             // metrics.csv, epochs.csv, summary.json, checkpoints/
  int checkpoint_every = 0;        // iterations; 0: none
  std::string resume_dir;          // continue from DIR/checkpoints
  // A new run into an out_dir that holds a run: replace that run (its records, checkpoints and
  // plots) instead of refusing.
  bool overwrite = false;
  std::uint64_t max_iters = 0;     // stop after this many iterations in all (0: no limit)
  int timeout_ms = 60'000;
  std::string on_nonfinite = "stop";  // a NaN/Inf gradient: stop, or skip the step on every worker
  std::string inject_fault;        // KIND:RANK:ITERATION (sparsgd/core/fault_plan.hpp); empty: none
};

// The optimizer settings a task trains with unless told otherwise: the image tasks the momentum SGD
// of the gTop-k paper (TrainConfig's own defaults); lm Adam as the convergence study tuned it on real
// text (docs/results/convergence.md: lr 0.008 best for dense S-SGD), 10 token streams a worker, clip
// 0.25, dropout 0.3. With SGD's defaults an LSTM learns nothing in a few epochs (the unigram
// perplexity).
struct TaskRecipe {
  std::string optimizer;
  double lr = 0.0;
  double weight_decay = 0.0;
  double clip_norm = 0.0;
  double dropout = 0.0;
  int batch_size = 0;
};
// Throws InvalidArgument for an unknown task.
TaskRecipe task_recipe(const std::string& task);
// Sets each option of the task's recipe that `given("--lr")` (say) says was not given.
void apply_task_recipe(TrainConfig& config, const std::function<bool(std::string_view flag)>& given);
// Every task's recipe in one line, for help texts.
std::string task_recipes_help();

// Throws InvalidArgument naming the first bad option.
void validate(const TrainConfig& config);

// Whether the run uses momentum correction (momentum_correction resolved: auto is on for sgd with a
// sparse exchange).
bool uses_momentum_correction(const TrainConfig& config);

// The gradient exchange the options describe, at the first epoch's density.
collectives::ExchangeConfig exchange_config(const TrainConfig& config);

// The configuration with the task's defaults filled in (model, data directory): what the run
// reports, fingerprints and checks across ranks.
TrainConfig with_task_defaults(TrainConfig config);

// What must match between a checkpointed run and its resumption.
std::string fingerprint(const TrainConfig& config, int workers);

// Every option that must be the same on every rank, named as the CLI names it. Not --workers (one
// worker per rank under MPI) and not --data (a path on each host).
std::vector<std::pair<std::string, std::string>> run_config_fields(const TrainConfig& config);

}  // namespace sparsgd::torch_layer
