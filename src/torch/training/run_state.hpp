#pragma once
// Where a run is and what it has counted: everything besides the model, the optimizer and the task
// that a checkpoint must hold for a resumed run to continue bit for bit. Each field is named once,
// in fields(), from which both the save and the load are made.

#include <cstdint>
#include <vector>

#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/trainer.hpp"

namespace sparsgd::torch_layer {

struct RunState {
  int epoch = 0;                        // of the next iteration
  std::uint64_t next_iteration = 0;     // within that epoch
  std::uint64_t step = 0;               // iterations done in all
  std::uint64_t bytes_sent = 0;         // by this worker, in all
  std::uint64_t skipped_steps = 0;
  double epoch_loss_sum = 0.0;          // this worker's batch losses in the current epoch
  double epoch_batches = 0.0;
  double wall_seconds = 0.0;            // of the run so far
  double compute_seconds = 0.0;         // this worker's, summed over iterations
  double compression_seconds = 0.0;
  double communication_seconds = 0.0;
  double simulated_seconds = 0.0;       // the simulated network's clock
  std::vector<EpochResult> history;

  void save(Checkpoint& checkpoint) const;
  // Throws InvalidData naming a missing or malformed section.
  void load(const Checkpoint& checkpoint);

  // The iteration count a checkpoint was written at, without loading the rest.
  static std::uint64_t step_of(const Checkpoint& checkpoint);

  // Throws InvalidData, naming the fields, unless the position is one this run can be at: epoch
  // below `epochs`, next_iteration at most `per_epoch`, step = epoch x per_epoch + next_iteration,
  // one history row per finished epoch (each at its epoch's last iteration), counts no larger than
  // the iterations they count. A checkpoint edited and re-checksummed is refused here.
  void check_position(std::uint64_t per_epoch, int epochs) const;

  // A line that differs when the position or any recorded result differs: what ranks compare
  // before they resume together.
  std::string summary_for_agreement() const;

  // Visits each field as (section name, reference).
  template <typename Self, typename Visit>
  static void fields(Self& s, Visit&& visit) {
    visit("run.epoch", s.epoch);
    visit("run.next_iteration", s.next_iteration);
    visit("run.step", s.step);
    visit("run.bytes_sent", s.bytes_sent);
    visit("run.skipped_steps", s.skipped_steps);
    visit("run.epoch_loss_sum", s.epoch_loss_sum);
    visit("run.epoch_batches", s.epoch_batches);
    visit("run.wall_seconds", s.wall_seconds);
    visit("run.compute_seconds", s.compute_seconds);
    visit("run.compression_seconds", s.compression_seconds);
    visit("run.communication_seconds", s.communication_seconds);
    visit("run.simulated_seconds", s.simulated_seconds);
  }
};

// The columns of an epoch's result, as (name, reference): epochs.csv's header and the checkpoint's
// history sections are made from this one list.
template <typename Result, typename Visit>
void epoch_result_fields(Result& e, Visit&& visit) {
  visit("epoch", e.epoch);
  visit("iterations", e.iterations);
  visit("train_loss", e.train_loss);
  visit("test_loss", e.test_loss);
  visit("test_accuracy", e.test_accuracy);
  visit("wall_s", e.wall_seconds);
  visit("simulated_s", e.simulated_seconds);
  visit("bytes_per_iteration", e.bytes_per_iteration);
  visit("test_perplexity", e.test_perplexity);
  visit("validation_loss", e.validation_loss);
  visit("validation_accuracy", e.validation_accuracy);
}

}  // namespace sparsgd::torch_layer
