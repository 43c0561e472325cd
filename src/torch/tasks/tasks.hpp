#pragma once
// The tasks behind load_task (sparsgd/torch/task.hpp), one file each, and what they share.

#include <memory>
#include <mutex>

#include "sparsgd/torch/task.hpp"

namespace sparsgd::torch_layer {

// torch::manual_seed sets one process-wide generator: models are built one at a time under this
// lock, so that rank 0's initial parameters do not depend on thread timing.
std::mutex& model_init_mutex();

std::unique_ptr<Task> make_fashion_mnist_task(const TrainConfig& config);
std::unique_ptr<Task> make_cifar10_task(const TrainConfig& config);
std::unique_ptr<Task> make_language_model_task(const TrainConfig& config);

// "cnn" for an image task, so that errors can list what the task accepts.
std::string models_of(const std::string& task);

}  // namespace sparsgd::torch_layer
