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

// loss.backward(), after checking that the loss depends on the model's parameters: a TorchScript
// forward that returns a detached tensor (or computes under no_grad) is refused naming the model,
// instead of LibTorch's error from deep inside autograd.
void backward(const torch::Tensor& loss, const std::string& model);

// Task::identity's parts. A set of examples [N, ...]: "N x (shape of one), sample <hash>", the hash
// over 256 whole examples spread evenly (all of them when fewer). Values (labels, tokens): their count
// and the hash of all of them. The model: its name, or a TorchScript file's size and hash.
std::string examples_identity(const torch::Tensor& examples);
std::string values_identity(const torch::Tensor& values);
std::string values_identity(const std::vector<std::int64_t>& values);
std::string words_identity(const std::vector<std::string>& words);
std::string model_identity(const std::string& model);

}  // namespace sparsgd::torch_layer
