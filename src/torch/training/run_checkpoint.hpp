#pragma once
// A worker's checkpoint, composed of its parts as a torch state_dict is of its modules: each part
// saves and loads its own named sections (the parameters and batch-norm buffers, the optimizer's
// state and residuals, the task's carried state, the run's position and totals), and the checkpoint
// says whose it is (the run's fingerprint, the data and model it learns from, the rank and world
// size).

#include <string>

#include "run_state.hpp"
#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/torch/flat_parameters.hpp"
#include "sparsgd/torch/task.hpp"
#include "sparsgd/torch/training_optimizer.hpp"

namespace sparsgd::torch_layer {

struct RunParts {
  TrainingOptimizer& optimizer;  // with the flat parameters
  FlatParameters& buffers;
  TaskWorker& worker;
  RunState& state;
};

Checkpoint capture(const RunParts& parts, const std::string& fingerprint, const std::string& data_identity, int rank,
                   int workers);

// The parts as the checkpoint holds them. Throws InvalidData naming a section that is missing or
// does not fit (another model, optimizer or batch size). Identity and fingerprint are checked
// where the checkpoint is chosen (resume.hpp).
void restore(const Checkpoint& checkpoint, RunParts& parts);

}  // namespace sparsgd::torch_layer
