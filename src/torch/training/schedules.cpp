#include "schedules.hpp"

#include <cmath>
#include <numbers>

namespace sparsgd::torch_layer {

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

double density_at(const TrainConfig& c, double epoch_position) {
  return c.warmup_density > 0.0 && epoch_position < c.warmup_density_epochs ? c.warmup_density : c.exchange.density;
}

}  // namespace sparsgd::torch_layer
