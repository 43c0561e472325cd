#pragma once
// What the trainer trains, whoever built it: a model compiled into sparsgd (a torch::nn::Module) or
// a TorchScript file a user exported from Python (a torch::jit::Module), seen through one interface
// so that the loop, the gradient exchange and the checkpoints do not care which.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/script.h>
#include <torch/types.h>

namespace sparsgd::torch_layer {

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // The parameters that require gradients, with their dotted names, in a fixed order (the order of
  // the flat buffer the exchange works on).
  virtual std::vector<std::pair<std::string, torch::Tensor>> named_parameters() = 0;
  // Floating-point buffers (batch-norm running statistics): averaged over the workers before an
  // evaluation, and checkpointed.
  virtual std::vector<torch::Tensor> float_buffers() = 0;
  virtual void set_training(bool training) = 0;
  // Moves parameters and buffers to `device`, in place (the tensors named above stay valid).
  virtual void to(const torch::Device& device) = 0;

  std::vector<torch::Tensor> parameters();
  std::int64_t parameter_count();  // trainable scalars
  void zero_grad();
};

// An nn::Module held by the trainer (the built-in models).
class ModuleModel : public TrainableModel {
 public:
  explicit ModuleModel(std::shared_ptr<torch::nn::Module> module) : module_(std::move(module)) {}
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override;
  std::vector<torch::Tensor> float_buffers() override;
  void set_training(bool training) override { module_->train(training); }
  void to(const torch::Device& device) override { module_->to(device); }

 private:
  std::shared_ptr<torch::nn::Module> module_;
};

// A TorchScript module loaded from a file: forward takes the inputs the task gives and returns one
// tensor (the task checks its shape). Its parameters train in place, as a built-in model's do.
class ScriptedModel : public TrainableModel {
 public:
  // Throws InvalidArgument when the file is missing, InvalidData when it is not a TorchScript
  // module, has no forward method or no trainable parameter.
  explicit ScriptedModel(const std::string& path);
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override;
  std::vector<torch::Tensor> float_buffers() override;
  void set_training(bool training) override { module_.train(training); }
  void to(const torch::Device& device) override { module_.to(device); }
  // Throws InvalidData naming the file when forward fails or does not return a tensor.
  torch::Tensor forward(std::vector<torch::jit::IValue> inputs);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  torch::jit::Module module_;
};

// True when a --model value names a TorchScript file rather than a built-in model.
bool is_scripted_model(const std::string& model);

// Throws InvalidArgument when the TorchScript file is missing (saying how to make one), InvalidData
// when it is not a regular file (a FIFO, a device, a directory: never read).
void check_scripted_model_file(const std::string& path);

}  // namespace sparsgd::torch_layer
