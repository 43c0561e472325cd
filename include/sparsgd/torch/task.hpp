#pragma once
// A training task: the data, the model that fits it, how a worker gets its batches from its shard,
// the loss, and how the result is judged. The trainer's loop runs over any task; a task is chosen
// by name (--task) and reads its data from a directory (--data).
//
//   fashion-mnist  Debian's dataset-fashion-mnist (gzipped IDX), 1x28x28, 10 classes; accuracy.
//   cifar10        the official binary files (data_batch_1..5.bin, test_batch.bin; 3073 bytes a
//                  record), 3x32x32, 10 classes, random crop (4-pixel padding) and horizontal flip,
//                  per-channel normalization; accuracy.
//   lm             a word-level corpus in PTB's layout (train.txt, valid.txt, test.txt, one sentence
//                  a line); an LSTM language model, truncated BPTT; perplexity.
//
// Models: a built-in name (mlp, cnn, resnet20, vgg16 for the image tasks; lstm for lm) or a
// TorchScript file (sparsgd/torch/trainable_model.hpp). An image task's TorchScript model maps
// [B, C, H, W] float32 to [B, classes]; a language model's maps [B, T] int64 tokens to
// [B, T, vocabulary] logits (no state is carried between segments).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/train_config.hpp"
#include "sparsgd/torch/trainable_model.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

// What a run is evaluated on: the validation set (held out of the training data, for tuning) or
// the test set (the reported result).
enum class EvalSet { validation, test };

struct Evaluation {
  double loss = 0.0;      // mean over the set's examples (lm: tokens) of all workers
  double accuracy = 0.0;  // in [0, 1] (lm: of the next word)
};

// One worker's part of a task: its model, its batches, its share of the evaluation.
class TaskWorker {
 public:
  virtual ~TaskWorker() = default;
  virtual TrainableModel& model() = 0;
  // Before an epoch's first iteration (the shuffled order, a fresh recurrent state). `resumed`: the
  // epoch continues from a checkpoint, whose state load() has restored and must be kept.
  virtual void start_epoch(int epoch, bool resumed) = 0;
  // Builds this worker's batch `iteration` of the epoch, runs forward and backward (the gradients
  // replace what the parameters' .grad held) and returns the batch's mean loss; nullopt when this
  // worker's shard has no batch left (a shorter shard at the end of an epoch: the worker still
  // takes part in the exchange, with zero gradients).
  virtual std::optional<double> train_step(int epoch, std::uint64_t iteration) = 0;
  // The set split over the workers; collective over `transport` (every worker returns the result
  // over all of them). Leaves the model in training mode. Only when Task::has_validation() for
  // the validation set.
  virtual Evaluation evaluate(EvalSet set, transport::Transport& transport) = 0;
  // State carried from one iteration to the next besides parameters, buffers and optimizer (an
  // LSTM's hidden state), as named checkpoint sections, and back.
  virtual void save(Checkpoint& /*checkpoint*/) const {}
  virtual void load(const Checkpoint& /*checkpoint*/) {}
};

// Memory one worker needs for activations, for the check before training.
struct ActivationEstimate {
  double bytes = 0;
  std::string described;  // "activations of a batch of 32 and of an evaluation batch"
};

class Task {
 public:
  virtual ~Task() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& model_name() const = 0;
  // "accuracy" or "perplexity": what the run is judged by.
  virtual std::string metric() const = 0;
  // Whether there is a validation set (image tasks: --validation N; lm: a non-empty valid.txt).
  virtual bool has_validation() const = 0;
  // Iterations every worker runs per epoch (enough for the largest shard).
  virtual std::size_t iterations_per_epoch(int workers) const = 0;
  // Throws InvalidArgument, saying what would fit, when the batch (or sequence) is more than a
  // worker's shard holds.
  virtual void check_fits(int workers) const = 0;
  // Worker `rank` of `workers`, with its model built from the run's seed (a built-in model) or
  // loaded from the TorchScript file; the parameters are then replaced by rank 0's. The model's
  // output is checked against the task on a small batch (InvalidData when it does not fit).
  virtual std::unique_ptr<TaskWorker> make_worker(int rank, int workers) const = 0;
  // One of `workers` workers' activations: of a training batch, and of an evaluation batch no larger
  // than its share of the largest evaluated set (at many workers, the share is the smaller).
  virtual ActivationEstimate activation_memory(int workers) const = 0;
  // The model's trainable scalars, before any worker is built (the memory check comes first): a
  // built-in language model's from its shape, an image classifier's by building one (their sizes
  // are fixed), a TorchScript model's by loading it.
  virtual std::int64_t parameter_count() const = 0;
  // What the run learns from, as a line a person can compare: the data as loaded (each set's size,
  // a hash of all its labels or tokens and of 256 examples spread over it) and the model (a
  // built-in's name; a TorchScript file's size and the hash of all its bytes). A checkpoint holds
  // it, and a resume with other data or another model is refused naming both.
  virtual std::string identity() const = 0;
};

// The task names --task accepts, in a stable order.
const std::vector<std::string>& task_names();

// The default --model and --data of a task ("" when the task has no default data).
std::string default_model(const std::string& task);
std::string default_data_dir(const std::string& task);

// Checks the options (validate) and loads the task's data (shared read-only by in-process
// workers). Throws InvalidArgument for a bad option, an unknown task, a model that does not belong
// to it, or missing files (naming them and where to get
// them); InvalidData for files that are not what they should be (naming the file, the expected
// size or format).
std::unique_ptr<Task> load_task(const TrainConfig& config);

}  // namespace sparsgd::torch_layer
