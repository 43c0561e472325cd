#pragma once
// The learning rate and the density as the run goes: warm-ups (the gTop-k paper's recipe) and decay.

#include "sparsgd/torch/train_config.hpp"

namespace sparsgd::torch_layer {

// At `epoch_position` (epochs since the start, fractional): the schedule's decay (step: x0.1 at 50%
// and x0.01 at 75% of the epochs; cosine), then a linear warm-up from lr/workers to it over the
// first warmup_epochs.
double learning_rate(const TrainConfig& config, int workers, double epoch_position);

// warmup_density over the first warmup_density_epochs when it is set, the density afterwards.
double density_at(const TrainConfig& config, double epoch_position);

}  // namespace sparsgd::torch_layer
