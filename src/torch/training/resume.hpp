#pragma once
// Resuming a run: each rank keeps its last two checkpoints (rank-R.ckpt, rank-R.prev.ckpt), and all
// ranks agree on the newest iteration that every one of them holds complete.

#include <string>

#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/train_config.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

struct ResumePoint {
  Checkpoint checkpoint;
  std::string warning;  // set when this rank had to pass over a damaged or missing newest file
};

// A rank's checkpoint file in DIR/checkpoints, or the one it replaced.
std::string checkpoint_file(int rank, bool previous);

// What a checkpoint must match to be resumed by this run.
struct ResumeExpectations {
  std::string fingerprint;  // the options that define the run (fingerprint())
  std::string data;         // the data and the model (Task::identity())
  std::uint64_t per_epoch = 0;
  // The most this run's checkpoint can hold (from its parameters, buffers and epochs): a larger file
  // is refused before it is read.
  std::uint64_t max_checkpoint_bytes = kMaxCheckpointBytes;
};

// Collective. Reads this rank's files in config.resume_dir, refuses a checkpoint of other options,
// other data or another model (InvalidArgument, naming both sides) or of another rank (files
// swapped), passes over one whose position does not add up (RunState::check_position) as over a
// damaged one, and returns the checkpoint of the newest iteration every rank holds, after the ranks
// have checked that their states at it agree; InvalidData when there is none, saying which
// iterations each holds.
ResumePoint agree_on_resume_point(transport::Transport& transport, const TrainConfig& config,
                                  const ResumeExpectations& expected);

}  // namespace sparsgd::torch_layer
