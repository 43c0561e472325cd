// What a training task adds to an iteration: per task, the worker's whole compute step (its batch
// built from the shard: gather, augmentation, normalization; zeroing the gradients; forward, loss,
// backward; reading the loss) beside the forward and backward of the same model on a batch built
// once. The ratio of the two is the task's data and bookkeeping overhead, which must stay under 5%
// of an iteration. One thread, as `sparsgd train` runs each worker. Compare the rows of one run:
//
//   build/bench/train_step_benchmarks --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// CIFAR-10 and the text corpus are generated in the official layouts (random pixels, random words
// of a 10,000-word vocabulary); Fashion-MNIST is Debian's.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "sparsgd/torch/cifar10.hpp"
#include "sparsgd/torch/fashion_mnist.hpp"
#include "sparsgd/torch/language_model.hpp"
#include "sparsgd/torch/models.hpp"
#include "sparsgd/torch/task.hpp"
#include "sparsgd/torch/trainer.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sparsgd::torch_layer;

const fs::path& data_root() {
  static const fs::path root = [] {
    const fs::path dir = fs::temp_directory_path() / ("sparsgd-train-step-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir / "cifar");
    fs::create_directories(dir / "corpus");
    std::mt19937 rng(1);
    const auto records = [&](int n) {
      std::string bytes;
      for (int i = 0; i < n; ++i) {
        bytes.push_back(static_cast<char>(i % 10));
        for (int p = 0; p < 3072; ++p) bytes.push_back(static_cast<char>(rng() & 0xff));
      }
      return bytes;
    };
    for (int i = 1; i <= 5; ++i) std::ofstream(dir / "cifar" / ("data_batch_" + std::to_string(i) + ".bin")) << records(400);
    std::ofstream(dir / "cifar" / "test_batch.bin") << records(100);
    for (const auto& [name, lines] : {std::pair{"train", 20000}, {"valid", 100}, {"test", 200}}) {
      std::ofstream out(dir / "corpus" / (std::string(name) + ".txt"));
      for (int l = 0; l < lines; ++l) {
        for (int w = 0; w < 20; ++w) out << " w" << rng() % 10000;
        out << '\n';
      }
    }
    return dir;
  }();
  return root;
}

TrainConfig config_for(const std::string& task, const std::string& model) {
  TrainConfig c;
  c.task = task;
  c.model = model;
  c.batch_size = task == "lm" ? 20 : 32;
  if (task == "cifar10") c.data_dir = (data_root() / "cifar").string();
  if (task == "lm") c.data_dir = (data_root() / "corpus").string();
  return with_task_defaults(c);
}

void BM_TaskStep(benchmark::State& state, const std::string& task_name, const std::string& model) {
  const TrainConfig c = config_for(task_name, model);
  const auto task = load_task(c);
  const auto worker = task->make_worker(0, 1);
  const std::uint64_t per_epoch = task->iterations_per_epoch(1);
  worker->start_epoch(0, false);
  std::uint64_t it = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(worker->train_step(0, it));
    if (++it == per_epoch) {
      it = 0;
      worker->start_epoch(0, false);
    }
  }
}

// The same architecture and batch, the batch built once: forward, loss, backward.
void BM_ForwardBackward(benchmark::State& state, const std::string& task_name, const std::string& model) {
  const TrainConfig c = config_for(task_name, model);
  if (task_name == "lm") {
    const auto task = load_task(c);  // for the vocabulary's size, as the task builds the model
    torch::manual_seed(1);
    const auto corpus_words = static_cast<std::int64_t>(task->make_worker(0, 1)->model().named_parameters().front().second.size(0));
    WordLstm lstm(LstmShape{corpus_words, c.hidden_size, 2, false, 0.0});
    const auto tokens = torch::randint(corpus_words, {c.batch_size, c.bptt}, torch::kInt64);
    const auto targets = torch::randint(corpus_words, {c.batch_size, c.bptt}, torch::kInt64);
    RecurrentState hidden;
    for (auto _ : state) {
      lstm.zero_grad();
      const auto logits = lstm.forward(tokens, hidden);
      const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, corpus_words}), targets.reshape({-1}));
      loss.backward();
      benchmark::DoNotOptimize(loss.data_ptr());
    }
    return;
  }
  const ImageShape shape = task_name == "cifar10" ? kCifar10Shape : kFashionMnistShape;
  torch::manual_seed(1);
  const auto net = make_model(model, shape);
  // The task's own first images (costs can depend on the values: zeros, denormals), normalized.
  torch::Tensor x, y;
  if (task_name == "cifar10") {
    const Cifar10Images images = load_cifar10(c.data_dir, true);
    x = images.images.slice(0, 0, c.batch_size).to(torch::kFloat32).div(255.0).sub(0.48).div(0.25);
    y = images.labels.slice(0, 0, c.batch_size);
  } else {
    const Dataset images = load_fashion_mnist(c.data_dir, true);
    x = images.images.slice(0, 0, c.batch_size).clone();
    y = images.labels.slice(0, 0, c.batch_size).clone();
  }
  for (auto _ : state) {
    net->zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    benchmark::DoNotOptimize(loss.data_ptr());
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_ForwardBackward, fashion_mnist_cnn, std::string("fashion-mnist"), std::string("cnn"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_TaskStep, fashion_mnist_cnn, std::string("fashion-mnist"), std::string("cnn"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_ForwardBackward, cifar10_resnet20, std::string("cifar10"), std::string("resnet20"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_TaskStep, cifar10_resnet20, std::string("cifar10"), std::string("resnet20"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_ForwardBackward, cifar10_vgg16, std::string("cifar10"), std::string("vgg16"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_TaskStep, cifar10_vgg16, std::string("cifar10"), std::string("vgg16"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_ForwardBackward, lm_lstm, std::string("lm"), std::string("lstm"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);
BENCHMARK_CAPTURE(BM_TaskStep, lm_lstm, std::string("lm"), std::string("lstm"))->Unit(benchmark::kMillisecond)->MinWarmUpTime(1.0);

int main(int argc, char** argv) {
  use_one_thread_per_worker();  // as each `sparsgd train` worker runs
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(data_root());
  return 0;
}
