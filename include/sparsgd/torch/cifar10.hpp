#pragma once
// CIFAR-10 (Krizhevsky 2009) from its official binary files: data_batch_1.bin .. data_batch_5.bin
// (training) and test_batch.bin, each a sequence of 3073-byte records: one label byte (0-9), then
// 1024 red, 1024 green and 1024 blue pixel bytes of a 32x32 image, row by row. Get them from
// https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz (the "CIFAR-10 binary version").

#include <cstdint>
#include <string>

#include <torch/types.h>

namespace sparsgd::torch_layer {

inline constexpr std::int64_t kCifar10RecordBytes = 3073;
// Per-channel mean and standard deviation of the training pixels scaled to [0, 1] (R, G, B).
inline constexpr float kCifar10Mean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifar10Std[3] = {0.2470f, 0.2435f, 0.2616f};

struct Cifar10Images {
  torch::Tensor images;  // [N, 3, 32, 32] uint8, as stored (normalized per batch)
  torch::Tensor labels;  // [N] int64 in [0, 9]
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Reads the five training files (train) or test_batch.bin from `dir`, or from
// dir/cifar-10-batches-bin where the archive was unpacked. A missing file throws InvalidArgument
// naming it and where to get the files; an empty file, a size that is not a whole number of
// records, or a label above 9 throws InvalidData naming the file (and the record).
Cifar10Images load_cifar10(const std::string& dir, bool train);

}  // namespace sparsgd::torch_layer
