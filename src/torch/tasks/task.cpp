#include "sparsgd/torch/task.hpp"

#include "sparsgd/core/error.hpp"
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

std::unique_ptr<Task> load_task(const TrainConfig& given) {
  validate(given);  // the one check of the options, the model's fit to the task among them
  const TrainConfig config = with_task_defaults(given);
  if (config.task == "fashion-mnist") return make_fashion_mnist_task(config);
  if (config.task == "cifar10") return make_cifar10_task(config);
  if (config.task == "lm") return make_language_model_task(config);
  throw InvalidArgument("unknown --task '" + config.task + "' (expected fashion-mnist, cifar10 or lm)");
}

}  // namespace sparsgd::torch_layer
