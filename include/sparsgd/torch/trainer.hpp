#pragma once
// Data-parallel training of a task's model with sparse gradient exchange: P in-process workers
// (the embedded default) or one worker per MPI rank. Torch-free header, so that the CLI and other
// callers need no LibTorch includes.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/training/memory.hpp"
#include "sparsgd/torch/train_config.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

// Consecutive skipped steps after which on_nonfinite = skip gives up: the run has diverged.
inline constexpr int kMaxConsecutiveSkips = 10;

struct EpochResult {
  int epoch = 0;
  std::uint64_t iterations = 0;        // in all, so far
  double train_loss = 0.0;             // mean over the epoch's batches and workers
  double test_loss = 0.0;
  double test_accuracy = 0.0;          // in [0, 1] (lm: of the next word)
  double test_perplexity = 0.0;        // lm: exp(test_loss); 0 for classifiers
  // On the validation set (held out of the training data); NaN without one.
  double validation_loss = std::numeric_limits<double>::quiet_NaN();
  double validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  double wall_seconds = 0.0;           // since the start of training (rank 0)
  double simulated_seconds = 0.0;      // rank 0's virtual clock (0 without a network)
  double bytes_per_iteration = 0.0;    // sent per worker per iteration, mean over workers
};

struct IterationRecord {
  int epoch = 0;
  std::uint64_t step = 0;              // global iteration
  std::uint64_t steps_total = 0;       // planned in all
  double loss = 0.0;                   // rank 0's batch loss
  double lr = 0.0;
  double density = 0.0;
  std::uint64_t bytes_sent = 0;        // rank 0, this iteration
  double compute_seconds = 0.0;        // forward + backward, thread CPU time
  double compression_seconds = 0.0;    // thread CPU time
  double communication_seconds = 0.0;  // aggregation wall time
  double simulated_seconds = 0.0;      // rank 0's virtual clock
  double wall_seconds = 0.0;
};

struct TrainSummary {
  std::string task, model, compressor, aggregator, network;
  std::string metric = "accuracy";     // what the task is judged by: accuracy or perplexity
  std::string optimizer = "sgd";
  double r_factor = 0.0;  // rtopk only
  std::int64_t parameters = 0;
  int workers = 0;
  int epochs = 0;
  std::uint64_t iterations = 0;
  double density = 0.0;
  double final_train_loss = 0.0;
  double final_test_loss = 0.0;
  double final_test_accuracy = 0.0;
  double final_test_perplexity = 0.0;  // lm only
  double final_validation_loss = std::numeric_limits<double>::quiet_NaN();  // NaN without a validation set
  double final_validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  bool error_feedback = true;
  // --aggregator auto: the network it chose for, and its choice for the whole model.
  std::optional<collectives::NetworkEstimate> auto_network;
  std::string auto_choice;                // the closed forms' proposal for the whole model
  std::vector<std::string> auto_settled;  // per exchange: what the trials settled on (or the last tried)
  // Every option of the run as the CLI names it (run_config_fields), so that a summary says how
  // to rerun it.
  std::vector<std::pair<std::string, std::string>> options;
  double bytes_per_iteration = 0.0;    // sent per worker per iteration, mean over workers
  double wall_seconds = 0.0;
  double simulated_seconds = 0.0;
  double compute_seconds = 0.0;        // rank 0, summed over iterations
  double compression_seconds = 0.0;
  double communication_seconds = 0.0;
  double simulated_communication_seconds = 0.0;
  bool resumed = false;
  std::uint64_t resumed_at = 0;        // the iteration the run resumed from
  std::uint64_t skipped_steps = 0;     // on_nonfinite = skip
  MemoryUse memory;                    // the estimate checked before training, and the peak
  std::vector<EpochResult> history;
};

std::string to_json(const TrainSummary& summary);

// Told of progress on rank 0.
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const TrainSummary& /*plan*/, std::uint64_t /*steps_total*/) {}
  virtual void on_iteration(const IterationRecord& /*record*/) {}
  virtual void on_epoch(const EpochResult& /*result*/) {}
};

// P = config.workers in-process workers over the local transport.
TrainSummary train(const TrainConfig& config, TrainObserver* observer = nullptr);
// This process is one worker of a run over `transport` (an MPI rank, say). Every rank returns the
// summary; rank 0 writes the files and tells the observer. workers_on_this_machine: ranks that
// share this machine's memory (for the memory check).
TrainSummary train_worker(transport::Transport& transport, const TrainConfig& config,
                          TrainObserver* observer = nullptr, int workers_on_this_machine = 1);

// One intra-op and one BLAS thread in this process, as every training worker runs: the workers are
// the parallelism (more threads would oversubscribe the cores), and a fixed thread count keeps the
// arithmetic identical between in-process and MPI runs. train() and train_worker() call it.
void use_one_thread_per_worker();

// What the memory estimate of a training run is made from.
struct TrainMemoryInputs {
  std::int64_t parameters = 0;
  double activation_bytes = 0;     // one worker's (Task::activation_memory)
  std::string activations_described;
  int workers = 1;                 // in the job
  int workers_here = 1;            // in this process (MPI: the ranks on this machine)
  std::string aggregator = "gtopk-rd";
  bool dense_compressor = false;   // --compressor none: no selection, no pairs
  double density = 0.01;
  std::string optimizer = "sgd";
};

// The memory training needs beyond what the process holds once the data is loaded, per worker: the
// activations; the model's weights and gradients, the averager's flat gradient and average and the
// optimizer's state (arrays of n floats); the exchange's own buffers (its aggregator's footprint,
// as bench comm counts them, the residual among them); the thread. Checked against the peak
// resident memory of real runs up to 1024 workers by tests/reliability.
MemoryEstimate train_memory_estimate(const TrainMemoryInputs& inputs);

}  // namespace sparsgd::torch_layer
