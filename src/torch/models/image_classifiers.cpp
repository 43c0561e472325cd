#include "sparsgd/torch/models.hpp"

#include <torch/torch.h>

#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {
namespace {

class Mlp final : public Classifier {
 public:
  explicit Mlp(const ImageShape& s)
      : fc1_(register_module("fc1", torch::nn::Linear(s.channels * s.height * s.width, 256))),
        fc2_(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3_(register_module("fc3", torch::nn::Linear(128, s.classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Linear fc1_, fc2_, fc3_;
};

class Cnn final : public Classifier {
 public:
  explicit Cnn(const ImageShape& s)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(s.channels, 32, 5).padding(2)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 5).padding(2)))),
        fc1_(register_module("fc1", torch::nn::Linear(64 * (s.height / 4) * (s.width / 4), 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, s.classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);  // 28 -> 14 (32 -> 16)
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);  // 14 -> 7 (16 -> 8)
    x = torch::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

// torchvision's initialization of its convolutional networks: Kaiming normal (fan_out) for
// convolutions, batch norm as identity; linear layers keep LibTorch's default.
void initialize_like_torchvision(torch::nn::Module& model) {
  for (auto& m : model.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
    } else if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(bn->weight);
      torch::nn::init::zeros_(bn->bias);
    }
  }
}

torch::nn::Conv2d conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// He et al. (2016), section 4.2: two 3x3 convolutions with batch norm. Where the block halves the
// resolution and doubles the channels, the shortcut subsamples and zero-pads the new channels
// (option A), which adds no parameters and gives the paper's (and the gTop-k authors') 0.27M.
class BasicBlock final : public torch::nn::Module {
 public:
  BasicBlock(std::int64_t in, std::int64_t out, std::int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(out))),
        stride_(stride),
        pad_channels_(out - in) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    return torch::relu(y + shortcut(x));
  }

 private:
  torch::Tensor shortcut(const torch::Tensor& x) const {
    if (stride_ == 1 && pad_channels_ == 0) return x;
    auto s = x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    const std::int64_t before = pad_channels_ / 2;
    return torch::constant_pad_nd(s, {0, 0, 0, 0, before, pad_channels_ - before}, 0.0);
  }

  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
  std::int64_t stride_;
  std::int64_t pad_channels_;
};

class ResNet20 final : public Classifier {
 public:
  explicit ResNet20(const ImageShape& s)
      : conv1_(register_module("conv1", conv3x3(s.channels, 16, 1))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(16))) {
    constexpr int kBlocksPerStage = 3;
    std::int64_t in = 16;
    for (int stage = 0; stage < 3; ++stage) {
      const std::int64_t out = std::int64_t{16} << stage;  // 16, 32, 64 channels at 28, 14, 7
      for (int b = 0; b < kBlocksPerStage; ++b) {
        const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        // Module names may not contain dots, hence stage1_block0 rather than stage1.0.
        const std::string name = "stage" + std::to_string(stage + 1) + "_block" + std::to_string(b);
        blocks_.push_back(register_module(name, std::make_shared<BasicBlock>(in, out, stride)));
        in = out;
      }
    }
    // Registered last so that parameters() lists the layers in the order the input meets them.
    fc_ = register_module("fc", torch::nn::Linear(64, s.classes));
    initialize_like_torchvision(*this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    for (auto& block : blocks_) x = block->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
  torch::nn::Linear fc_{nullptr};
};

// Simonyan and Zisserman's VGG-16 as the CIFAR experiments use it (the gTop-k authors' code, after
// kuangliu/pytorch-cifar): batch norm after every convolution, one linear layer on the 512 features
// that five poolings leave of a 32x32 image.
class Vgg16 final : public Classifier {
 public:
  explicit Vgg16(const ImageShape& s) {
    constexpr std::int64_t kPool = 0;
    const std::int64_t layout[] = {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool,
                                   512, 512, 512, kPool, 512, 512, 512, kPool};
    std::int64_t in = s.channels;
    for (const std::int64_t out : layout) {
      if (out == kPool) {
        features_->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
        continue;
      }
      features_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)));
      features_->push_back(torch::nn::BatchNorm2d(out));
      features_->push_back(torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)));
      in = out;
    }
    register_module("features", features_);
    // After five poolings of 2: 32x32 -> 1x1; larger images are averaged down to 1x1.
    classifier_ = register_module("classifier", torch::nn::Linear(512, s.classes));
    initialize_like_torchvision(*this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = features_->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return classifier_->forward(x);
  }

 private:
  torch::nn::Sequential features_;
  torch::nn::Linear classifier_{nullptr};
};

void check_shape(const std::string& name, const ImageShape& s) {
  SPARSGD_ENFORCE(s.channels >= 1 && s.height >= 1 && s.width >= 1 && s.classes >= 2,
                  "model " << name << ": bad input shape " << s.channels << "x" << s.height << "x" << s.width
                           << " with " << s.classes << " classes");
  if (name == "cnn") {
    SPARSGD_ENFORCE(s.height >= 4 && s.width >= 4, "model cnn needs images of at least 4x4 (two 2x2 poolings), got "
                                                        << s.height << "x" << s.width);
  }
  if (name == "vgg16") {
    SPARSGD_ENFORCE(s.height >= 32 && s.width >= 32,
                    "model vgg16 needs images of at least 32x32 (five 2x2 poolings), got "
                        << s.height << "x" << s.width << ": use it with --task cifar10, or choose mlp, cnn or resnet20");
  }
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "cnn", "resnet20", "vgg16"};
  return names;
}

std::shared_ptr<Classifier> make_model(const std::string& name, const ImageShape& shape) {
  if (name == "mlp" || name == "cnn" || name == "resnet20" || name == "vgg16") check_shape(name, shape);
  if (name == "mlp") return std::make_shared<Mlp>(shape);
  if (name == "cnn") return std::make_shared<Cnn>(shape);
  if (name == "resnet20") return std::make_shared<ResNet20>(shape);
  if (name == "vgg16") return std::make_shared<Vgg16>(shape);
  std::string valid;
  for (const auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown model '" + name + "'; valid models: " + valid);
}

// Measured as the peak resident memory of `sparsgd train` over batch sizes, on 28x28x1
// (Fashion-MNIST: mlp, cnn, resnet20) and 32x32x3 (CIFAR-10: resnet20, vgg16); activations grow
// with the pixels, so other sizes scale from the nearest measurement. CIFAR-10's resnet20 was
// measured again with torch 2.11 (LibTorch 1.13 needed less): 391, 603 and 958 MiB at batches 32,
// 128 and 256 with 500 test images, 480 MiB at batch 128 with 100, and up to 684 MiB at 128 under
// load; its figures keep every one of those below the estimate.
ActivationMemory activation_memory(const std::string& name, const ImageShape& shape) {
  constexpr double kKiB = 1024.0, kMiB = 1024.0 * 1024.0;
  const bool cifar = shape.channels == 3 && shape.height == 32 && shape.width == 32;
  const double input = 4.0 * static_cast<double>(shape.channels * shape.height * shape.width);
  ActivationMemory m;
  if (cifar && name == "resnet20") return {3.0 * kMiB, 0.6 * kMiB};
  if (cifar && name == "vgg16") return {1.0 * kMiB, 0.35 * kMiB};
  if (name == "vgg16") m = {1.0 * kMiB, 0.35 * kMiB};  // measured at 32x32
  else if (name == "mlp") m = {12 * kKiB, 12 * kKiB};
  else if (name == "cnn") m = {0.26 * kMiB, 0.35 * kMiB};
  else if (name == "resnet20") m = {1.35 * kMiB, 0.36 * kMiB};
  else throw InvalidArgument("activation_memory: unknown model '" + name + "'");
  if (shape.height == 28 && shape.width == 28 && shape.channels == 1) return m;
  const double pixels = static_cast<double>(shape.height * shape.width) / (name == "vgg16" ? 32.0 * 32.0 : 28.0 * 28.0);
  // The batch itself, and its augmented and normalized copies.
  return {m.train_bytes_per_example * pixels + 3 * input, m.eval_bytes_per_example * pixels + 2 * input};
}

std::int64_t parameter_count(torch::nn::Module& module) {
  std::int64_t count = 0;
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    if (p.requires_grad()) count += p.numel();
  }
  return count;
}

}  // namespace sparsgd::torch_layer
