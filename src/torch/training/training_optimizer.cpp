#include "sparsgd/torch/training_optimizer.hpp"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/model_gradient_averager.hpp"

namespace sparsgd::torch_layer {
namespace {

void save_residuals(Checkpoint& checkpoint, const std::vector<std::vector<float>>& residuals) {
  for (std::size_t i = 0; i < residuals.size(); ++i) checkpoint.floats["residual-" + std::to_string(i)] = residuals[i];
}

std::vector<std::vector<float>> load_residuals(const Checkpoint& checkpoint) {
  std::vector<std::vector<float>> residuals;
  for (std::size_t i = 0; checkpoint.floats.count("residual-" + std::to_string(i)) > 0; ++i) {
    residuals.push_back(checkpoint.float_section("residual-" + std::to_string(i)));
  }
  return residuals;
}

// --optimizer sgd: the MomentumSgd, with its velocities and residuals in the checkpoint.
class SgdTrainingOptimizer final : public TrainingOptimizer {
 public:
  SgdTrainingOptimizer(transport::Transport& transport, std::vector<torch::Tensor> parameters, std::vector<std::string> names,
                       const collectives::ExchangeConfig& exchange, const SgdConfig& sgd)
      : optimizer_(transport, std::move(parameters), std::move(names), exchange, sgd) {}
  StepStats step(std::uint64_t iteration, double lr) override { return optimizer_.step(iteration, lr); }
  void set_density(double density) override { optimizer_.set_density(density); }
  double density() const override { return optimizer_.density(); }
  FlatParameters& flat() override { return optimizer_.flat(); }
  const GradientAverager& averager() const override { return optimizer_.averager(); }
  void save(Checkpoint& checkpoint) const override {
    checkpoint.floats["velocity"] = optimizer_.velocity();
    checkpoint.floats["local_velocity"] = optimizer_.local_velocity();
    save_residuals(checkpoint, optimizer_.residuals());
  }
  void load(const Checkpoint& checkpoint) override {
    optimizer_.velocity() = checkpoint.float_section("velocity");
    optimizer_.set_local_velocity(checkpoint.float_section("local_velocity"));
    SPARSGD_ENFORCE_EQ(optimizer_.velocity().size(), optimizer_.size(), "checkpoint velocity does not fit the model");
    optimizer_.set_residuals(load_residuals(checkpoint));
  }

 private:
  MomentumSgd optimizer_;
};

// Adam or AdamW (their per-parameter states have the same fields) on synchronized gradients.
template <typename Optimizer, typename Options, typename State>
class TorchOptimizer final : public TrainingOptimizer {
 public:
  TorchOptimizer(transport::Transport& transport, std::vector<torch::Tensor> parameters, std::vector<std::string> names,
                 const collectives::ExchangeConfig& exchange, const SgdConfig& sgd)
      : parameters_(parameters),
        sync_(transport, parameters, std::move(names), config(exchange, sgd)),
        optimizer_(parameters, Options(1e-3).weight_decay(sgd.weight_decay)) {}

  StepStats step(std::uint64_t iteration, double lr) override {
    StepStats stats = sync_.synchronize(iteration);
    if (stats.skipped) return stats;
    for (auto& group : optimizer_.param_groups()) static_cast<Options&>(group.options()).lr(lr);
    optimizer_.step();
    return stats;
  }
  void set_density(double density) override { sync_.averager().set_density(density); }
  double density() const override { return sync_.averager().density(); }
  FlatParameters& flat() override { return sync_.flat(); }
  const GradientAverager& averager() const override { return sync_.averager(); }

  // Per parameter, in order: its step count, and its two moment estimates laid out as the flat
  // parameter buffer (zeros and step 0 for a parameter that has not stepped yet).
  void save(Checkpoint& checkpoint) const override {
    std::vector<float> first(sync_.size(), 0.0f), second(sync_.size(), 0.0f);
    std::vector<std::uint64_t> steps;
    const auto& ranges = sync_.flat().layer_ranges();
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      const auto found = optimizer_.state().find(key(parameters_[i]));
      if (found == optimizer_.state().end()) {
        steps.push_back(0);
        continue;
      }
      const auto& state = static_cast<const State&>(*found->second);
      steps.push_back(static_cast<std::uint64_t>(state.step()));
      copy_out(state.exp_avg(), first.data() + ranges[i].first);
      copy_out(state.exp_avg_sq(), second.data() + ranges[i].first);
    }
    checkpoint.floats["adam_exp_avg"] = std::move(first);
    checkpoint.floats["adam_exp_avg_sq"] = std::move(second);
    checkpoint.integers["adam_steps"] = std::move(steps);
    save_residuals(checkpoint, sync_.averager().residuals());
  }
  void load(const Checkpoint& checkpoint) override {
    const auto& first = checkpoint.float_section("adam_exp_avg");
    const auto& second = checkpoint.float_section("adam_exp_avg_sq");
    const auto& steps = checkpoint.integer_section("adam_steps");
    SPARSGD_ENFORCE(first.size() == sync_.size() && second.size() == sync_.size() && steps.size() == parameters_.size(),
                    "checkpoint optimizer state does not fit the model (another optimizer or model?)");
    const auto& ranges = sync_.flat().layer_ranges();
    optimizer_.state().clear();
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (steps[i] == 0) continue;
      auto state = std::make_unique<State>();
      state->step(static_cast<std::int64_t>(steps[i]));
      state->exp_avg(copy_in(first.data() + ranges[i].first, parameters_[i]));
      state->exp_avg_sq(copy_in(second.data() + ranges[i].first, parameters_[i]));
      optimizer_.state()[key(parameters_[i])] = std::move(state);
    }
    sync_.averager().set_residuals(load_residuals(checkpoint));
  }

 private:
  static ModelAveragerConfig config(const collectives::ExchangeConfig& exchange, const SgdConfig& sgd) {
    SPARSGD_ENFORCE(sgd.momentum_correction == false && sgd.nesterov == false,
                    "momentum correction and Nesterov momentum belong to --optimizer sgd");
    ModelAveragerConfig c;
    c.exchange = exchange;
    c.per_layer = sgd.per_layer;
    c.skip_nonfinite = sgd.skip_nonfinite;
    return c;
  }
  // The optimizer's state is keyed by the parameter's TensorImpl: its address itself in torch 2.x
  // releases whose map has void* keys, the address printed as text in older ones.
  static auto key(const torch::Tensor& p) {
    using Key = typename std::decay_t<decltype(std::declval<Optimizer&>().state())>::key_type;
    if constexpr (std::is_same_v<Key, std::string>) {
      std::ostringstream text;
      text << p.unsafeGetTensorImpl();
      return text.str();
    } else {
      return static_cast<Key>(p.unsafeGetTensorImpl());
    }
  }
  static void copy_out(const torch::Tensor& t, float* out) {
    const auto c = t.detach().to(torch::kFloat32).contiguous();
    std::memcpy(out, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
  }
  static torch::Tensor copy_in(const float* in, const torch::Tensor& like) {
    torch::Tensor t = torch::empty_like(like, torch::MemoryFormat::Contiguous);
    std::memcpy(t.data_ptr<float>(), in, static_cast<std::size_t>(t.numel()) * sizeof(float));
    return t;
  }

  std::vector<torch::Tensor> parameters_;
  ModelGradientAverager sync_;
  Optimizer optimizer_;
};

}  // namespace

const std::vector<std::string>& training_optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "adam", "adamw"};
  return names;
}

std::unique_ptr<TrainingOptimizer> make_training_optimizer(const std::string& name, transport::Transport& transport,
                                                           std::vector<torch::Tensor> parameters,
                                                           std::vector<std::string> names,
                                                           const collectives::ExchangeConfig& exchange,
                                                           const SgdConfig& sgd) {
  if (name == "sgd") return std::make_unique<SgdTrainingOptimizer>(transport, std::move(parameters), std::move(names), exchange, sgd);
  if (name == "adam") {
    return std::make_unique<TorchOptimizer<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>>(
        transport, std::move(parameters), std::move(names), exchange, sgd);
  }
  if (name == "adamw") {
    return std::make_unique<TorchOptimizer<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>>(
        transport, std::move(parameters), std::move(names), exchange, sgd);
  }
  throw InvalidArgument("unknown optimizer '" + name + "' (expected sgd, adam or adamw)");
}

}  // namespace sparsgd::torch_layer
