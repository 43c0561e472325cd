#pragma once
// The image classifiers the trainer can run on 28x28 grayscale input (Fashion-MNIST), chosen by
// name so that the command line and the experiments can name them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace sparsgd::torch_layer {

// Input [B, 1, 28, 28] float32, output logits [B, 10]. A common base so that the trainer can hold
// any model behind one pointer; torch::nn::Module itself has no forward.
struct Classifier : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// "mlp": 784-256-128-10 with ReLU.
// "cnn": two 5x5 conv + ReLU + 2x2 max-pool stages (32 and 64 channels), fc 3136-128, fc 128-10.
// "resnet20": He et al.'s CIFAR ResNet-20 for one input channel: 3 stages of 3 basic blocks with
//   16/32/64 channels, batch norm, parameter-free shortcuts (option A), global average pool.
// Initialization draws from LibTorch's global generator, so torch::manual_seed before the call
// makes it reproducible. An unknown name throws sparsgd::InvalidArgument listing model_names().
std::shared_ptr<Classifier> make_model(const std::string& name);

// The names make_model accepts, in a stable order.
const std::vector<std::string>& model_names();

// Memory a model's activations take per example, for the memory estimate made before training:
// training keeps every layer's output for the backward pass; evaluation (no gradients, batches of
// up to 1000) keeps less but its im2col buffers are wide. Measured as the peak resident memory of
// `sparsgd train` over batch sizes, and checked against it in tests/reliability.
struct ActivationMemory {
  double train_bytes_per_example = 0;
  double eval_bytes_per_example = 0;
};
ActivationMemory activation_memory(const std::string& name);

// Number of trainable scalars (parameters that require grad); buffers such as batch-norm running
// statistics are not counted.
std::int64_t parameter_count(torch::nn::Module& module);

}  // namespace sparsgd::torch_layer
