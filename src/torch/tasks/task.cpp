#include "sparsgd/torch/task.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"
#include "sparsgd/core/hash.hpp"
#include "sparsgd/torch/fashion_mnist.hpp"
#include "tasks.hpp"

namespace sparsgd::torch_layer {

std::mutex& model_init_mutex() {
  static std::mutex mutex;
  return mutex;
}

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names{"fashion-mnist", "cifar10", "lm"};
  return names;
}

std::string default_model(const std::string& task) {
  if (task == "cifar10") return "resnet20";
  if (task == "lm") return "lstm";
  return "cnn";
}

std::string default_data_dir(const std::string& task) {
  return task == "fashion-mnist" ? kDefaultFashionMnistDir : "";
}

std::string models_of(const std::string& task) {
  if (task == "lm") return "lstm or a TorchScript file (*.pt)";
  if (task == "cifar10") return "mlp, cnn, resnet20, vgg16 or a TorchScript file (*.pt)";
  return "mlp, cnn, resnet20 or a TorchScript file (*.pt)";
}

namespace {

std::string hex(std::uint64_t h) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::uint64_t hash_bytes(const torch::Tensor& contiguous, std::uint64_t h = kFnv1aOffset) {
  const auto* bytes = static_cast<const std::byte*>(contiguous.data_ptr());
  return fnv1a(std::span<const std::byte>(bytes, contiguous.numel() * contiguous.element_size()), h);
}

}  // namespace

void backward(const torch::Tensor& loss, const std::string& model) {
  if (!loss.requires_grad()) {
    throw InvalidData("--model " + model + ": the loss does not depend on the model's parameters (does its forward "
                      "return a detached tensor, or compute under torch.no_grad()?): there is nothing to train");
  }
  loss.backward();
}

std::string examples_identity(const torch::Tensor& examples) {
  const torch::Tensor all = examples.contiguous().cpu();
  const std::int64_t n = all.size(0);
  const std::int64_t samples = std::min<std::int64_t>(n, 256);
  std::uint64_t h = kFnv1aOffset;
  for (std::int64_t i = 0; i < samples; ++i) h = hash_bytes(all[i * n / samples].contiguous(), h);
  std::string shape;
  for (std::int64_t d = 1; d < all.dim(); ++d) {
    if (d > 1) shape += 'x';
    shape += std::to_string(all.size(d));
  }
  return std::to_string(n) + " x " + (shape.empty() ? "1" : shape) + " " + std::string(c10::toString(all.scalar_type())) +
         ", sample " + hex(h);
}

std::string values_identity(const torch::Tensor& values) {
  const torch::Tensor all = values.contiguous().cpu();
  return std::to_string(all.numel()) + " " + std::string(c10::toString(all.scalar_type())) + " " + hex(hash_bytes(all));
}

std::string values_identity(const std::vector<std::int64_t>& values) {
  // from_blob does not write through the pointer; it only needs a non-const one.
  auto* data = const_cast<std::int64_t*>(values.data());
  return values_identity(torch::from_blob(data, {static_cast<std::int64_t>(values.size())}, torch::kInt64));
}

std::string words_identity(const std::vector<std::string>& words) {
  std::uint64_t h = kFnv1aOffset;
  for (const std::string& word : words) {
    h = fnv1a(std::as_bytes(std::span<const char>(word.data(), word.size() + 1)), h);  // with its NUL: a separator
  }
  return std::to_string(words.size()) + " words " + hex(h);
}

std::string model_identity(const std::string& model) {
  if (!is_scripted_model(model)) return "model " + model;
  check_scripted_model_file(model);
  const FileDigest digest = digest_regular_file(model, "TorchScript model");
  return "model " + model + " (" + std::to_string(digest.bytes) + " bytes, " + hex(digest.hash) + ")";
}

std::unique_ptr<Task> load_task(const TrainConfig& given) {
  validate(given);  // the one check of the options, the model's fit to the task among them
  const TrainConfig config = with_task_defaults(given);
  if (config.task == "fashion-mnist") return make_fashion_mnist_task(config);
  if (config.task == "cifar10") return make_cifar10_task(config);
  if (config.task == "lm") return make_language_model_task(config);
  throw InvalidArgument("unknown --task '" + config.task + "' (expected fashion-mnist, cifar10 or lm)");
}

}  // namespace sparsgd::torch_layer
