#include "sparsgd/torch/trainable_model.hpp"

#include <filesystem>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::torch_layer {

std::vector<torch::Tensor> TrainableModel::parameters() {
  std::vector<torch::Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

std::int64_t TrainableModel::parameter_count() {
  std::int64_t count = 0;
  for (const auto& p : parameters()) count += p.numel();
  return count;
}

void TrainableModel::zero_grad() {
  for (auto& p : parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

std::vector<std::pair<std::string, torch::Tensor>> ModuleModel::named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

std::vector<torch::Tensor> ModuleModel::float_buffers() {
  std::vector<torch::Tensor> out;
  for (auto& b : module_->buffers()) {
    if (b.scalar_type() == torch::kFloat32) out.push_back(b);
  }
  return out;
}

bool is_scripted_model(const std::string& model) {
  return model.find('/') != std::string::npos || model.ends_with(".pt") || model.ends_with(".pth");
}

void check_scripted_model_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InvalidArgument("TorchScript model " + path +
                          " not found (--model takes a built-in model's name or the path of a file saved with "
                          "torch.jit.script(model).save(path); see examples/export_torchscript.py)");
  }
  check_regular_file(path, "TorchScript model");
}

ScriptedModel::ScriptedModel(const std::string& path) : path_(path) {
  check_scripted_model_file(path);
  try {
    module_ = torch::jit::load(path);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (const auto cut = why.find('\n'); cut != std::string::npos) why.resize(cut);
    throw InvalidData("--model " + path + " is not a TorchScript module (" + why +
                      "); save one with torch.jit.script(model).save(path)");
  }
  if (!module_.find_method("forward")) throw InvalidData("TorchScript model " + path + " has no forward method");
  if (named_parameters().empty()) {
    throw InvalidData("TorchScript model " + path + " has no trainable parameter (was it saved from a frozen or "
                      "traced-in-eval module with requires_grad off?)");
  }
  module_.train(true);
}

std::vector<std::pair<std::string, torch::Tensor>> ScriptedModel::named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : module_.named_parameters(/*recurse=*/true)) {
    if (item.value.requires_grad()) out.emplace_back(item.name, item.value);
  }
  return out;
}

std::vector<torch::Tensor> ScriptedModel::float_buffers() {
  std::vector<torch::Tensor> out;
  for (const auto& item : module_.named_buffers(/*recurse=*/true)) {
    if (item.value.scalar_type() == torch::kFloat32) out.push_back(item.value);
  }
  return out;
}

torch::Tensor ScriptedModel::forward(std::vector<torch::jit::IValue> inputs) {
  torch::jit::IValue out;
  try {
    out = module_.forward(std::move(inputs));
  } catch (const std::exception& e) {
    // TorchScript's messages carry the interpreter's traceback; the error itself is its last line.
    std::string why = e.what();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (const auto line = why.rfind('\n'); line != std::string::npos) why.erase(0, line + 1);
    throw InvalidData("TorchScript model " + path_ + ": forward failed on the task's input: " + why);
  }
  if (!out.isTensor()) {
    throw InvalidData("TorchScript model " + path_ + ": forward returned " + out.tagKind() + ", expected one tensor");
  }
  return out.toTensor();
}

}  // namespace sparsgd::torch_layer
