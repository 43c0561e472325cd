// The word-level language modelling task (--task lm): each worker's contiguous share of the training
// token stream is laid out as --batch-size parallel streams and trained by truncated
// backpropagation through time, --bptt tokens a segment, the LSTM's state carried from segment to
// segment (and checkpointed) and reset at each epoch. Cross-entropy per token; judged by the test
// perplexity, exp(mean cross-entropy).

#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/torch/language_model.hpp"
#include "sparsgd/torch/sharding.hpp"
#include "sparsgd/torch/text_corpus.hpp"
#include "tasks.hpp"

namespace sparsgd::torch_layer {
namespace {

constexpr std::int64_t kEvalStreams = 10;  // as in PyTorch's word_language_model example

// A worker's share of a token stream as `streams` rows of equal length (the remainder dropped).
torch::Tensor batchify(const std::vector<std::int64_t>& tokens, std::size_t begin, std::size_t end, std::int64_t streams) {
  const auto length = static_cast<std::int64_t>(end - begin) / streams;
  torch::Tensor out = torch::empty({streams, length}, torch::kInt64);
  if (length > 0) {
    std::memcpy(out.data_ptr<std::int64_t>(), tokens.data() + begin,
                static_cast<std::size_t>(streams * length) * sizeof(std::int64_t));
  }
  return out;
}

LstmShape lstm_shape(std::int64_t vocabulary, const TrainConfig& config) {
  return {vocabulary, config.hidden_size, 2, config.tied, config.dropout};
}

class LanguageWorker final : public TaskWorker {
 public:
  LanguageWorker(const TextCorpus& corpus, const TrainConfig& config, int rank, int workers)
      : corpus_(corpus), config_(config), rank_(rank),
        generator_(at::make_generator<at::CPUGeneratorImpl>(config.seed)) {
    const auto [begin, end] = shard_range(corpus.train.size(), workers, rank);
    train_ = batchify(corpus.train, begin, end, config.batch_size);
    const auto vocabulary = static_cast<std::int64_t>(corpus.vocabulary.size());
    if (is_scripted_model(config.model)) {
      scripted_ = std::make_unique<ScriptedModel>(config.model);
      check_scripted_output(vocabulary);
      return;
    }
    std::lock_guard lock(model_init_mutex());
    torch::manual_seed(config.seed);
    builtin_ = std::make_shared<WordLstm>(lstm_shape(vocabulary, config));
    module_ = std::make_unique<ModuleModel>(builtin_);
  }

  TrainableModel& model() override { return scripted_ ? static_cast<TrainableModel&>(*scripted_) : *module_; }

  void start_epoch(int /*epoch*/, bool resumed) override {
    if (!resumed) state_ = {};
  }

  std::optional<double> train_step(int epoch, std::uint64_t iteration) override {
    model().zero_grad();
    const std::int64_t at = static_cast<std::int64_t>(iteration) * config_.bptt;
    const std::int64_t length = std::min<std::int64_t>(config_.bptt, train_.size(1) - 1 - at);
    if (length <= 0) return std::nullopt;
    // Dropout masks from a generator seeded per (epoch, iteration, rank): nothing to checkpoint.
    generator_.set_current_seed(
        mix_seed(config_.seed, (static_cast<std::uint64_t>(epoch) << 32) + iteration, static_cast<std::uint64_t>(rank_)));
    const auto loss = segment_loss(train_.narrow(1, at, length), train_.narrow(1, at + 1, length), state_, &generator_);
    backward(loss, config_.model);
    return loss.item<double>();
  }

  Evaluation evaluate(EvalSet which, transport::Transport& transport) override {
    const std::vector<std::int64_t>& tokens = which == EvalSet::test ? corpus_.test : corpus_.valid;
    const char* file = which == EvalSet::test ? "test.txt" : "valid.txt";
    torch::NoGradGuard no_grad;
    model().set_training(false);
    const auto [begin, end] = shard_range(tokens.size(), transport.size(), transport.rank());
    const std::int64_t streams = std::min<std::int64_t>(kEvalStreams, static_cast<std::int64_t>(end - begin) / 2);
    double totals[3] = {0.0, 0.0, 0.0};  // loss sum, correct, tokens
    if (streams > 0) {
      const torch::Tensor test = batchify(tokens, begin, end, streams);
      RecurrentState state;
      for (std::int64_t at = 0; at + 1 < test.size(1); at += config_.bptt) {
        const std::int64_t length = std::min<std::int64_t>(config_.bptt, test.size(1) - 1 - at);
        const auto targets = test.narrow(1, at + 1, length);
        const auto logits = forward(test.narrow(1, at, length), state, nullptr);
        const auto flat = logits.reshape({-1, logits.size(2)});
        const auto y = targets.reshape({-1});
        totals[0] += torch::nn::functional::cross_entropy(
                         flat, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                         .item<double>();
        totals[1] += flat.argmax(1).eq(y).sum().item<double>();
        totals[2] += static_cast<double>(y.numel());
      }
    }
    collectives::allreduce_sum(transport, totals);
    model().set_training(true);
    SPARSGD_ENFORCE(totals[2] > 0, "--task lm: " << file << " has too few tokens to evaluate on");
    return {totals[0] / totals[2], totals[1] / totals[2]};
  }

  void save(Checkpoint& checkpoint) const override {
    if (!state_.defined()) return;
    checkpoint.integers["lm.state_shape"] = {static_cast<std::uint64_t>(state_.h.size(0)),
                                             static_cast<std::uint64_t>(state_.h.size(1)),
                                             static_cast<std::uint64_t>(state_.h.size(2))};
    checkpoint.floats["lm.state_h"] = values(state_.h);
    checkpoint.floats["lm.state_c"] = values(state_.c);
  }

  void load(const Checkpoint& checkpoint) override {
    state_ = {};
    if (checkpoint.integers.count("lm.state_shape") == 0) return;  // saved at the start of an epoch
    const auto& shape = checkpoint.integer_section("lm.state_shape");
    SPARSGD_ENFORCE(shape.size() == 3, "checkpoint section lm.state_shape is malformed");
    const std::vector<std::int64_t> sizes{static_cast<std::int64_t>(shape[0]), static_cast<std::int64_t>(shape[1]),
                                          static_cast<std::int64_t>(shape[2])};
    state_.h = tensor(checkpoint.float_section("lm.state_h"), sizes);
    state_.c = tensor(checkpoint.float_section("lm.state_c"), sizes);
  }

 private:
  torch::Tensor forward(const torch::Tensor& tokens, RecurrentState& state, at::Generator* generator) {
    if (builtin_) return builtin_->forward(tokens, state, generator);
    return scripted_->forward({tokens});
  }

  torch::Tensor segment_loss(const torch::Tensor& inputs, const torch::Tensor& targets, RecurrentState& state,
                             at::Generator* generator) {
    const auto logits = forward(inputs, state, generator);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), targets.reshape({-1}));
  }

  // A TorchScript language model must map [B, T] tokens to [B, T, vocabulary] logits.
  void check_scripted_output(std::int64_t vocabulary) {
    torch::NoGradGuard no_grad;
    scripted_->set_training(false);
    const auto tokens = torch::zeros({2, 3}, torch::kInt64);
    const auto out = scripted_->forward({tokens});
    scripted_->set_training(true);
    if (out.dim() != 3 || out.size(0) != 2 || out.size(1) != 3 || out.size(2) != vocabulary ||
        out.scalar_type() != torch::kFloat32) {
      throw InvalidData("TorchScript model " + config_.model + " maps tokens [2, 3] to " + c10::str(out.sizes()) + " " +
                        std::string(c10::toString(out.scalar_type())) + "; --task lm needs float32 logits [2, 3, " +
                        std::to_string(vocabulary) + "] (the vocabulary of train.txt)");
    }
  }

  static std::vector<float> values(const torch::Tensor& t) {
    const auto c = t.contiguous();
    return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
  }
  torch::Tensor tensor(const std::vector<float>& v, const std::vector<std::int64_t>& sizes) const {
    const std::int64_t expected = sizes[0] * sizes[1] * sizes[2];
    SPARSGD_ENFORCE(static_cast<std::int64_t>(v.size()) == expected && sizes[1] == config_.batch_size,
                    "checkpoint LSTM state does not fit this run (another --batch-size or --hidden-size?)");
    return torch::from_blob(const_cast<float*>(v.data()), sizes, torch::kFloat32).clone();
  }

  const TextCorpus& corpus_;
  const TrainConfig& config_;
  int rank_;
  at::Generator generator_;
  torch::Tensor train_;  // [streams, length]
  std::shared_ptr<WordLstm> builtin_;
  std::unique_ptr<ModuleModel> module_;
  std::unique_ptr<ScriptedModel> scripted_;
  RecurrentState state_;
};

class LanguageModelTask final : public Task {
 public:
  // The options (model of the task, --bptt >= 1) were checked by load_task (validate).
  LanguageModelTask(TextCorpus corpus, const TrainConfig& config)
      : corpus_(std::move(corpus)), config_(config),
        identity_("lm: vocabulary " + words_identity(corpus_.vocabulary) + "; train.txt " +
                  values_identity(corpus_.train) + "; valid.txt " + values_identity(corpus_.valid) + "; test.txt " +
                  values_identity(corpus_.test) + "; " + model_identity(config_.model)) {}

  const std::string& name() const override { return name_; }
  const std::string& model_name() const override { return config_.model; }
  std::string metric() const override { return "perplexity"; }
  bool has_validation() const override { return !corpus_.valid.empty(); }

  std::size_t iterations_per_epoch(int workers) const override {
    const std::int64_t length = stream_length(workers);
    return length < 2 ? 0 : static_cast<std::size_t>((length - 1 + config_.bptt - 1) / config_.bptt);
  }

  void check_fits(int workers) const override {
    const auto [begin, end] = shard_range(corpus_.train.size(), workers, workers - 1);  // a smallest shard
    const std::size_t tokens = end - begin;
    const std::int64_t length = static_cast<std::int64_t>(tokens) / config_.batch_size;
    SPARSGD_ENFORCE(length >= 2, "--batch-size " << config_.batch_size << " streams of a worker's " << tokens
                                                 << " training tokens (train.txt's " << corpus_.train.size()
                                                 << " over " << workers << " workers) leave fewer than 2 tokens a "
                                                    "stream; use at most "
                                                 << std::max<std::size_t>(1, tokens / 2));
    SPARSGD_ENFORCE(config_.bptt <= length - 1, "--bptt " << config_.bptt << " is longer than a worker's streams ("
                                                          << length << " tokens each: " << tokens << " tokens in "
                                                          << config_.batch_size << " streams); use at most "
                                                          << length - 1 << ", or a smaller --batch-size");
    SPARSGD_ENFORCE(corpus_.test.size() >= 2 * static_cast<std::size_t>(workers),
                    "test.txt's " << corpus_.test.size() << " tokens cannot be split over " << workers << " workers");
    SPARSGD_ENFORCE(corpus_.valid.empty() || corpus_.valid.size() >= 2 * static_cast<std::size_t>(workers),
                    "valid.txt's " << corpus_.valid.size() << " tokens cannot be split over " << workers
                                   << " workers (an empty valid.txt means no validation)");
  }

  std::unique_ptr<TaskWorker> make_worker(int rank, int workers) const override {
    return std::make_unique<LanguageWorker>(corpus_, config_, rank, workers);
  }

  std::string identity() const override { return identity_; }

  std::int64_t parameter_count() const override {
    if (is_scripted_model(config_.model)) return ScriptedModel(config_.model).parameter_count();
    return torch_layer::parameter_count(lstm_shape(static_cast<std::int64_t>(corpus_.vocabulary.size()), config_));
  }

  ActivationEstimate activation_memory(int /*workers*/) const override {
    // Per token: the logits and their gradient and softmax (3 x vocabulary floats), each layer's
    // gates, cell and output (about 12 x hidden floats a layer), the embedding.
    const double vocabulary = static_cast<double>(corpus_.vocabulary.size());
    const double hidden = config_.hidden_size;
    const double per_token = 4.0 * (3.0 * vocabulary + 2 * 12.0 * hidden + 2.0 * hidden);
    const double train_tokens = static_cast<double>(config_.batch_size) * config_.bptt;
    const double eval_tokens = static_cast<double>(kEvalStreams) * config_.bptt;
    return {train_tokens * per_token + eval_tokens * 4.0 * 2.0 * vocabulary,
            "activations of " + std::to_string(config_.batch_size) + " streams x " + std::to_string(config_.bptt) +
                " tokens and of an evaluation segment"};
  }

 private:
  std::int64_t stream_length(int workers) const {
    const auto [begin, end] = shard_range(corpus_.train.size(), workers, 0);  // a largest shard
    return static_cast<std::int64_t>(end - begin) / config_.batch_size;
  }

  const std::string name_ = "lm";
  TextCorpus corpus_;
  TrainConfig config_;
  std::string identity_;
};

}  // namespace

std::unique_ptr<Task> make_language_model_task(const TrainConfig& config) {
  SPARSGD_ENFORCE(!config.data_dir.empty(),
                  "--task lm needs --data DIR with train.txt, valid.txt and test.txt (one sentence a line, as the "
                  "Penn Treebank's ptb.train.txt, ptb.valid.txt, ptb.test.txt)");
  return std::make_unique<LanguageModelTask>(load_text_corpus(config.data_dir), config);
}

}  // namespace sparsgd::torch_layer
