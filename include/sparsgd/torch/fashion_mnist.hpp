#pragma once
// Fashion-MNIST (Xiao et al. 2017) as LibTorch tensors, read straight from the gzipped IDX files
// that Debian's dataset-fashion-mnist installs. Small enough to hold in memory whole, so the
// loader returns two tensors and leaves batching and sharding across workers to the trainer.

#include <cstdint>
#include <string>

#include <torch/types.h>

namespace sparsgd::torch_layer {

// Where Debian's dataset-fashion-mnist package puts the four files.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Mean and standard deviation of the training pixels scaled to [0, 1]; the images are stored
// normalized with them so that every model sees inputs of mean about 0 and deviation about 1.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct Dataset {
  torch::Tensor images;  // [N, 1, 28, 28] float32, (x / 255 - kFashionMnistMean) / kFashionMnistStd
  torch::Tensor labels;  // [N] int64 in [0, 9]
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Loads train-{images-idx3,labels-idx1}-ubyte.gz (train) or the t10k-* pair from `dir`.
// A missing file throws sparsgd::InvalidArgument naming the path and the package to install;
// a file that is not the expected IDX content (bad gzip stream, magic number, dimensions, count,
// truncation, trailing bytes, a label above 9, image and label counts that differ) throws
// sparsgd::InvalidData naming the file.
Dataset load_fashion_mnist(const std::string& dir, bool train);

}  // namespace sparsgd::torch_layer
