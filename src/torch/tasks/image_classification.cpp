// The image classification tasks: Fashion-MNIST (stored normalized, no augmentation) and CIFAR-10
// (stored as bytes; random crop with 4-pixel padding and horizontal flip, then per-channel
// normalization, as each batch is built). Cross-entropy loss, accuracy.

#include <torch/torch.h>

#include <array>

#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/torch/cifar10.hpp"
#include "sparsgd/torch/fashion_mnist.hpp"
#include "sparsgd/torch/models.hpp"
#include "sparsgd/torch/sharding.hpp"
#include "sparsgd/torch/worker_device.hpp"
#include "tasks.hpp"

namespace sparsgd::torch_layer {
namespace {

struct Images {
  torch::Tensor images;  // [N, C, H, W]: float32 already normalized, or uint8 normalized per batch
  torch::Tensor labels;  // [N] int64
  std::size_t size() const { return labels.defined() ? static_cast<std::size_t>(labels.size(0)) : 0; }
};

struct ImageTaskSpec {
  std::string name;
  ImageShape shape;
  bool augment = false;                       // random crop (padding 4) and horizontal flip
  std::array<float, 3> mean{}, std{};         // for uint8 images, per channel
  std::int64_t eval_batch = 1000;
  // For uint8 images: each channel's byte values normalized, made once (normalized_table()).
  std::array<std::array<float, 256>, 3> table{};

  void normalized_table() {
    for (std::size_t ch = 0; ch < 3; ++ch) {
      for (std::size_t v = 0; v < 256; ++v) table[ch][v] = (static_cast<float>(v) / 255.0f - mean[ch]) / std[ch];
    }
  }
};

// Builds the float inputs of `rows` of a uint8 image set: crop and flip drawn per example from
// (seed, epoch, example), so that a batch is the same whichever worker builds it and a resumed run
// draws what the uninterrupted one drew; pixels outside the image (the padding) are black.
// No augmentation without an augment seed (the test set).
struct Augment {
  bool on = false;
  std::uint64_t seed = 0;
};

torch::Tensor normalized_batch(const ImageTaskSpec& spec, const torch::Tensor& images, const std::int64_t* rows,
                               std::int64_t count, Augment augment) {
  const std::int64_t c = spec.shape.channels, h = spec.shape.height, w = spec.shape.width;
  torch::Tensor out = torch::empty({count, c, h, w}, torch::kFloat32);
  float* dst = out.data_ptr<float>();
  const std::uint8_t* base = images.data_ptr<std::uint8_t>();
  constexpr std::int64_t kPad = 4;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint8_t* src = base + rows[i] * c * h * w;
    std::int64_t dy = kPad, dx = kPad;
    bool flip = false;
    if (augment.on) {
      Rng rng(mix_seed(augment.seed, static_cast<std::uint64_t>(rows[i])));
      dy = static_cast<std::int64_t>(rng.below(2 * kPad + 1));
      dx = static_cast<std::int64_t>(rng.below(2 * kPad + 1));
      flip = rng.below(2) == 1;
    }
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto& lut = spec.table[static_cast<std::size_t>(ch)];
      const float black = lut[0];
      for (std::int64_t y = 0; y < h; ++y) {
        const std::int64_t sy = y + dy - kPad;
        for (std::int64_t x = 0; x < w; ++x) {
          const std::int64_t sx = (flip ? w - 1 - x : x) + dx - kPad;
          *dst++ = (sy < 0 || sy >= h || sx < 0 || sx >= w) ? black : lut[src[(ch * h + sy) * w + sx]];
        }
      }
    }
  }
  return out;
}

// A built-in classifier or a TorchScript one, with the forward the task calls.
class ImageModel {
 public:
  ImageModel(const std::string& name, const ImageShape& shape, std::uint64_t seed) {
    if (is_scripted_model(name)) {
      auto scripted = std::make_unique<ScriptedModel>(name);
      scripted_ = scripted.get();
      model_ = std::move(scripted);
      return;
    }
    std::lock_guard lock(model_init_mutex());
    torch::manual_seed(seed);
    builtin_ = make_model(name, shape);
    model_ = std::make_unique<ModuleModel>(builtin_);
  }
  TrainableModel& trainable() { return *model_; }
  void to(const torch::Device& device) {
    model_->to(device);
    device_ = device;
  }
  const torch::Device& device() const { return device_; }
  // The batch goes to the model's device first (its labels: labels()).
  torch::Tensor forward(const torch::Tensor& batch) {
    const torch::Tensor x = batch.to(device_);
    return builtin_ ? builtin_->forward(x) : scripted_->forward({x});
  }
  bool scripted() const { return scripted_ != nullptr; }

 private:
  std::shared_ptr<Classifier> builtin_;
  ScriptedModel* scripted_ = nullptr;
  std::unique_ptr<TrainableModel> model_;
  torch::Device device_ = torch::kCPU;
};

class ImageWorker final : public TaskWorker {
 public:
  ImageWorker(const ImageTaskSpec& spec, const Images& train, const Images& validation, const Images& test,
              const TrainConfig& config, int rank, int workers)
      : spec_(spec), train_(train), validation_(validation), test_(test), config_(config), rank_(rank), workers_(workers),
        model_(config.model, spec.shape, config.seed) {
    model_.to(worker_device(config.device, rank));
    if (model_.scripted()) check_output();
  }

  TrainableModel& model() override { return model_.trainable(); }

  void start_epoch(int epoch, bool /*resumed*/) override {
    order_.clear();
    const auto order = epoch_permutation(train_.size(), config_.seed, static_cast<std::uint64_t>(epoch));
    order_.assign(order.begin(), order.end());
  }

  std::optional<double> train_step(int epoch, std::uint64_t iteration) override {
    model_.trainable().zero_grad();
    const auto [shard_begin, shard_end] = shard_range(train_.size(), workers_, rank_);
    const auto batch = static_cast<std::size_t>(config_.batch_size);
    const std::size_t lo = std::min(shard_end, shard_begin + iteration * batch);
    const std::size_t hi = std::min(shard_end, lo + batch);
    if (hi <= lo) return std::nullopt;
    const std::int64_t* rows = order_.data() + lo;
    const auto count = static_cast<std::int64_t>(hi - lo);
    const auto index = torch::from_blob(const_cast<std::int64_t*>(rows), {count}, torch::kInt64);
    const Augment augment{spec_.augment, mix_seed(config_.seed, 0xa0a0, static_cast<std::uint64_t>(epoch))};
    const auto x = inputs(train_, rows, count, augment);
    const auto y = train_.labels.index_select(0, index).to(model_.device());
    const auto loss = torch::nn::functional::cross_entropy(model_.forward(x), y);
    backward(loss, config_.model);
    return loss.item<double>();
  }

  Evaluation evaluate(EvalSet which, transport::Transport& transport) override {
    const Images& set = which == EvalSet::test ? test_ : validation_;
    SPARSGD_ENFORCE(set.size() >= 1, "--task " << spec_.name << " has no validation set (--validation N makes one)");
    torch::NoGradGuard no_grad;
    model_.trainable().set_training(false);
    const auto [begin, end] = shard_range(set.size(), transport.size(), transport.rank());
    double totals[3] = {0.0, 0.0, 0.0};  // loss sum, correct, count
    std::vector<std::int64_t> rows;
    for (auto lo = static_cast<std::int64_t>(begin); lo < static_cast<std::int64_t>(end); lo += spec_.eval_batch) {
      const std::int64_t hi = std::min<std::int64_t>(lo + spec_.eval_batch, static_cast<std::int64_t>(end));
      rows.resize(static_cast<std::size_t>(hi - lo));
      for (std::int64_t i = lo; i < hi; ++i) rows[static_cast<std::size_t>(i - lo)] = i;
      const auto x = inputs(set, rows.data(), hi - lo, Augment{});
      const auto y = set.labels.slice(0, lo, hi).to(model_.device());
      const auto logits = model_.forward(x);
      totals[0] += torch::nn::functional::cross_entropy(
                       logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
      totals[1] += logits.argmax(1).eq(y).sum().item<double>();
      totals[2] += static_cast<double>(hi - lo);
    }
    collectives::allreduce_sum(transport, totals);
    model_.trainable().set_training(true);
    return {totals[0] / totals[2], totals[1] / totals[2]};
  }

 private:
  torch::Tensor inputs(const Images& set, const std::int64_t* rows, std::int64_t count,
                       Augment augment) const {
    if (set.images.scalar_type() == torch::kUInt8) return normalized_batch(spec_, set.images, rows, count, augment);
    const auto index = torch::from_blob(const_cast<std::int64_t*>(rows), {count}, torch::kInt64);
    return set.images.index_select(0, index);
  }

  // A TorchScript model must map the task's images to one logit per class.
  void check_output() {
    torch::NoGradGuard no_grad;
    model_.trainable().set_training(false);
    const std::int64_t rows[2] = {0, std::min<std::int64_t>(1, static_cast<std::int64_t>(train_.size()) - 1)};
    const auto out = model_.forward(inputs(train_, rows, 2, Augment{}));
    model_.trainable().set_training(true);
    const auto& s = spec_.shape;
    if (out.dim() != 2 || out.size(0) != 2 || out.size(1) != s.classes || out.scalar_type() != torch::kFloat32) {
      throw InvalidData("TorchScript model " + config_.model + " maps a batch of 2 images [2, " + std::to_string(s.channels) +
                        ", " + std::to_string(s.height) + ", " + std::to_string(s.width) + "] to " +
                        c10::str(out.sizes()) + " " + std::string(c10::toString(out.scalar_type())) +
                        "; --task " + spec_.name + " needs float32 logits [2, " + std::to_string(s.classes) + "]");
    }
  }

  const ImageTaskSpec& spec_;
  const Images& train_;
  const Images& validation_;
  const Images& test_;
  const TrainConfig& config_;
  int rank_, workers_;
  ImageModel model_;
  std::vector<std::int64_t> order_;
};

class ImageTask final : public Task {
 public:
  ImageTask(ImageTaskSpec spec, Images train, Images test, const TrainConfig& config)
      : spec_(std::move(spec)), test_(std::move(test)), config_(config) {
    // The model's name was checked against the task by load_task (validate); a shape it cannot take
    // is refused by make_model when the first worker is built, before training.
    SPARSGD_ENFORCE(test_.size() >= 1, "--task " << spec_.name << ": the test set is empty");
    // The validation set is the tail of the training set as stored, the same for every seed and
    // method, so that rates tuned on it are compared on the same examples.
    const auto n = static_cast<std::int64_t>(train.size());
    const std::int64_t held = config_.validation;
    SPARSGD_ENFORCE(held < n, "--validation " << held << " leaves nothing to train on: the training set has " << n
                                              << " examples");
    train_ = {train.images.narrow(0, 0, n - held), train.labels.narrow(0, 0, n - held)};
    validation_ = {train.images.narrow(0, n - held, held), train.labels.narrow(0, n - held, held)};
    // The whole training set as stored: --validation (in the options) says where it is split.
    identity_ = spec_.name + ": training set " + examples_identity(train.images) + ", labels " +
                values_identity(train.labels) + "; test set " + examples_identity(test_.images) + ", labels " +
                values_identity(test_.labels) + "; " + model_identity(config_.model);
  }

  const std::string& name() const override { return spec_.name; }
  const std::string& model_name() const override { return config_.model; }
  std::string metric() const override { return "accuracy"; }
  bool has_validation() const override { return validation_.size() > 0; }

  std::size_t iterations_per_epoch(int workers) const override {
    return torch_layer::iterations_per_epoch(train_.size(), workers, static_cast<std::size_t>(config_.batch_size));
  }

  void check_fits(int workers) const override {
    const std::size_t n = train_.size();
    const auto [begin, end] = shard_range(n, workers, 0);  // shard 0 is a largest one
    const std::size_t shard = end - begin;
    SPARSGD_ENFORCE(shard >= 1, "--workers " << workers << " is more than the " << n << " training examples");
    SPARSGD_ENFORCE(static_cast<std::size_t>(config_.batch_size) <= shard,
                    "--batch-size " << config_.batch_size << " is more than a worker's shard (" << shard << " of the " << n
                                    << " training examples over " << workers
                                    << " workers): every step would use the whole shard instead; use at most " << shard);
  }

  std::unique_ptr<TaskWorker> make_worker(int rank, int workers) const override {
    return std::make_unique<ImageWorker>(spec_, train_, validation_, test_, config_, rank, workers);
  }

  std::string identity() const override { return identity_; }

  std::int64_t parameter_count() const override {
    return ImageModel(config_.model, spec_.shape, config_.seed).trainable().parameter_count();
  }

  ActivationEstimate activation_memory(int workers) const override {
    // Each worker evaluates its share of the set, in batches of at most eval_batch.
    const std::size_t largest_set = std::max(test_.size(), validation_.size());
    const double share = static_cast<double>((largest_set + static_cast<std::size_t>(workers) - 1) /
                                             static_cast<std::size_t>(workers));
    const double eval = std::min<double>(static_cast<double>(spec_.eval_batch), share);
    if (is_scripted_model(config_.model)) {
      // Unknown architecture: the inputs are counted, the activations cannot be.
      const double input = 4.0 * static_cast<double>(spec_.shape.channels * spec_.shape.height * spec_.shape.width);
      return {3 * input * (config_.batch_size + eval),
              "inputs of a batch of " + std::to_string(config_.batch_size) +
                  " (a TorchScript model's activations are not estimated)"};
    }
    const ActivationMemory per = torch_layer::activation_memory(config_.model, spec_.shape);
    const double batch = std::min<double>(config_.batch_size, static_cast<double>(train_.size()));
    return {batch * per.train_bytes_per_example + eval * per.eval_bytes_per_example,
            "activations of a batch of " + std::to_string(static_cast<long long>(batch)) + " and of an evaluation batch of " +
                std::to_string(static_cast<long long>(eval))};
  }

 private:
  ImageTaskSpec spec_;
  Images train_, validation_, test_;
  TrainConfig config_;
  std::string identity_;
};

}  // namespace

std::unique_ptr<Task> make_fashion_mnist_task(const TrainConfig& config) {
  Dataset train = load_fashion_mnist(config.data_dir, true);
  Dataset test = load_fashion_mnist(config.data_dir, false);
  ImageTaskSpec spec{"fashion-mnist", kFashionMnistShape, false, {}, {}, 1000};
  return std::make_unique<ImageTask>(spec, Images{train.images, train.labels}, Images{test.images, test.labels}, config);
}

std::unique_ptr<Task> make_cifar10_task(const TrainConfig& config) {
  SPARSGD_ENFORCE(!config.data_dir.empty(),
                  "--task cifar10 needs --data DIR, the directory of the binary version's files (data_batch_1.bin .. "
                  "data_batch_5.bin, test_batch.bin) from https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
  Cifar10Images train = load_cifar10(config.data_dir, true);
  Cifar10Images test = load_cifar10(config.data_dir, false);
  ImageTaskSpec spec{"cifar10",
                     kCifar10Shape,
                     true,
                     {kCifar10Mean[0], kCifar10Mean[1], kCifar10Mean[2]},
                     {kCifar10Std[0], kCifar10Std[1], kCifar10Std[2]},
                     500};
  spec.normalized_table();
  return std::make_unique<ImageTask>(spec, Images{train.images, train.labels}, Images{test.images, test.labels}, config);
}

}  // namespace sparsgd::torch_layer
