#pragma once
// The built-in image classifiers, chosen by name so that the command line and the experiments can
// name them, built for a task's image shape (Fashion-MNIST's 1x28x28, CIFAR-10's 3x32x32).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace sparsgd::torch_layer {

// The input a classifier is built for.
struct ImageShape {
  std::int64_t channels = 1, height = 28, width = 28;
  std::int64_t classes = 10;
};
inline constexpr ImageShape kFashionMnistShape{1, 28, 28, 10};
inline constexpr ImageShape kCifar10Shape{3, 32, 32, 10};

// Input [B, C, H, W] float32, output logits [B, classes]. A common base so that the trainer can hold
// any model behind one pointer; torch::nn::Module itself has no forward.
struct Classifier : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// "mlp": (C*H*W)-256-128-classes with ReLU.
// "cnn": two 5x5 conv + ReLU + 2x2 max-pool stages (32 and 64 channels), fc 64*(H/4)*(W/4)-128,
//   fc 128-classes.
// "resnet20": He et al.'s CIFAR ResNet-20: 3 stages of 3 basic blocks with 16/32/64 channels,
//   batch norm, parameter-free shortcuts (option A), global average pool (0.27M parameters).
// "vgg16": the CIFAR VGG-16 of the gTop-k paper's experiments: 13 3x3 convolutions with batch norm
//   (64, 64, M, 128, 128, M, 256 x3, M, 512 x3, M, 512 x3, M), fc 512-classes (14.7M parameters);
//   it needs inputs of at least 32x32 (five 2x2 poolings).
// Initialization draws from LibTorch's global generator, so torch::manual_seed before the call
// makes it reproducible. An unknown name throws sparsgd::InvalidArgument listing model_names(); a
// shape the model cannot take throws InvalidArgument saying why.
std::shared_ptr<Classifier> make_model(const std::string& name, const ImageShape& shape = kFashionMnistShape);

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
ActivationMemory activation_memory(const std::string& name, const ImageShape& shape = kFashionMnistShape);

// Number of trainable scalars (parameters that require grad); buffers such as batch-norm running
// statistics are not counted.
std::int64_t parameter_count(torch::nn::Module& module);

}  // namespace sparsgd::torch_layer
