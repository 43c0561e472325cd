#include "sparsgd/torch/training_optimizer.hpp"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/device_gradient_averager.hpp"
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

std::vector<const collectives::Aggregator*> aggregators_of(const GradientAverager& averager) {
  std::vector<const collectives::Aggregator*> out;
  for (std::size_t e = 0; e < averager.exchange_count(); ++e) out.push_back(&averager.exchange(e).aggregator());
  return out;
}

std::vector<const collectives::Aggregator*> aggregators_of(const DeviceGradientAverager& averager) {
  std::vector<const collectives::Aggregator*> out;
  for (std::size_t e = 0; e < averager.exchange_count(); ++e) out.push_back(&averager.exchange(e).aggregator());
  return out;
}

std::vector<float> host_floats(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

torch::Tensor device_floats(const std::vector<float>& values, const torch::Device& device) {
  return torch::from_blob(const_cast<float*>(values.data()), {static_cast<std::int64_t>(values.size())}, torch::kFloat32)
      .to(device, /*non_blocking=*/false, /*copy=*/true);
}

// The gradient averaging a torch optimizer steps after, on the host engine: ModelGradientAverager.
class HostGradients {
 public:
  HostGradients(transport::Transport& transport, std::vector<torch::Tensor> parameters, std::vector<std::string> names,
                const ModelAveragerConfig& config)
      : sync_(transport, std::move(parameters), std::move(names), config) {}
  StepStats synchronize(std::uint64_t iteration) { return sync_.synchronize(iteration); }
  void set_density(double density) { sync_.averager().set_density(density); }
  double density() const { return sync_.averager().density(); }
  FlatParameters& flat() { return sync_.flat(); }
  const FlatParameters& flat() const { return sync_.flat(); }
  std::size_t size() const { return sync_.size(); }
  std::vector<std::vector<float>> residuals() const { return sync_.averager().residuals(); }
  void set_residuals(const std::vector<std::vector<float>>& residuals) { sync_.averager().set_residuals(residuals); }
  std::vector<const collectives::Aggregator*> aggregators() const { return aggregators_of(sync_.averager()); }

 private:
  ModelGradientAverager sync_;
};

// The same on the device path (parameters on a GPU): the flat gradient, its average and the
// residuals stay on the parameters' device.
class DeviceGradients {
 public:
  DeviceGradients(transport::Transport& transport, std::vector<torch::Tensor> parameters, std::vector<std::string> names,
                  const ModelAveragerConfig& config, double momentum_correction = 0.0)
      : flat_(std::move(parameters)),
        averager_(transport, flat_.layer_ranges(), std::move(names), config.exchange, config.per_layer,
                  config.skip_nonfinite, momentum_correction, flat_.device()),
        density_(config.exchange.density),
        average_(torch::empty({static_cast<std::int64_t>(flat_.size())},
                              torch::TensorOptions().dtype(torch::kFloat32).device(flat_.device()))) {}
  // The averaged gradient (valid until the next call), or nothing when the step is skipped.
  std::optional<torch::Tensor> average(const torch::Tensor& gradient, std::uint64_t iteration, StepStats& stats) {
    stats = averager_.check_finite(gradient, iteration);
    if (stats.skipped) return std::nullopt;
    stats = averager_.average(gradient, average_, iteration);
    return average_;
  }
  StepStats synchronize(std::uint64_t iteration) {
    torch::NoGradGuard no_grad;
    StepStats stats;
    if (const auto average = this->average(flat_.gradients(), iteration, stats)) flat_.set_gradients(*average);
    return stats;
  }
  void set_density(double density) {
    averager_.set_density(density);
    density_ = density;
  }
  double density() const { return density_; }
  FlatParameters& flat() { return flat_; }
  const FlatParameters& flat() const { return flat_; }
  std::size_t size() const { return flat_.size(); }
  DeviceGradientAverager& averager() { return averager_; }
  const DeviceGradientAverager& averager() const { return averager_; }
  std::vector<std::vector<float>> residuals() const {
    std::vector<std::vector<float>> out;
    for (const auto& r : averager_.residuals()) out.push_back(host_floats(r));
    return out;
  }
  void set_residuals(const std::vector<std::vector<float>>& residuals) {
    std::vector<torch::Tensor> tensors;
    for (const auto& r : residuals) tensors.push_back(device_floats(r, flat_.device()));
    averager_.set_residuals(tensors);
  }
  std::vector<const collectives::Aggregator*> aggregators() const { return aggregators_of(averager_); }

 private:
  FlatParameters flat_;
  DeviceGradientAverager averager_;
  double density_;
  torch::Tensor average_;
};

ModelAveragerConfig averager_config(const collectives::ExchangeConfig& exchange, const SgdConfig& sgd) {
  ModelAveragerConfig c;
  c.exchange = exchange;
  c.per_layer = sgd.per_layer;
  c.skip_nonfinite = sgd.skip_nonfinite;
  return c;
}

// --optimizer sgd on the device path: MomentumSgd's arithmetic, in the same order, in tensor ops
// on the parameters' device; its checkpoint sections are MomentumSgd's, so a run resumes on
// either path.
class DeviceSgdTrainingOptimizer final : public TrainingOptimizer {
 public:
  DeviceSgdTrainingOptimizer(transport::Transport& transport, std::vector<torch::Tensor> parameters,
                             std::vector<std::string> names, const collectives::ExchangeConfig& exchange,
                             const SgdConfig& sgd)
      : sgd_(validate_sgd(sgd)),
        gradients_(transport, std::move(parameters), std::move(names), averager_config(exchange, sgd),
                   sgd.momentum_correction ? sgd.momentum : 0.0),
        velocity_(torch::zeros({static_cast<std::int64_t>(gradients_.size())},
                               torch::TensorOptions().dtype(torch::kFloat32).device(gradients_.flat().device()))) {}

  StepStats step(std::uint64_t iteration, double lr) override {
    SPARSGD_ENFORCE(std::isfinite(lr) && lr >= 0.0, "learning rate must be a finite number >= 0, got " << lr);
    torch::NoGradGuard no_grad;
    FlatParameters& flat = gradients_.flat();
    torch::Tensor gradient = flat.gradients();
    torch::Tensor parameters = flat.values();
    const auto mu = static_cast<float>(sgd_.momentum);
    const auto wd = static_cast<float>(sgd_.weight_decay);
    const auto rate = static_cast<float>(lr);
    StepStats stats = gradients_.averager().check_finite(gradient, iteration);
    if (stats.skipped) return stats;
    // DGC adds the weight decay to the gradient before the worker's own momentum (the averager's).
    if (sgd_.momentum_correction) gradient.add_(parameters * wd);
    StepStats averaged;
    const auto average = gradients_.average(gradient, iteration, averaged);
    if (!average) return averaged;
    if (sgd_.momentum_correction) {
      parameters.sub_(*average * rate);
    } else {
      const torch::Tensor d = *average + parameters * wd;
      velocity_.mul_(mu).add_(d);
      parameters.sub_((sgd_.nesterov ? d + velocity_ * mu : velocity_) * rate);
    }
    flat.set_values(parameters);
    return averaged;
  }
  void set_density(double density) override { gradients_.set_density(density); }
  double density() const override { return gradients_.density(); }
  FlatParameters& flat() override { return gradients_.flat(); }
  std::vector<const collectives::Aggregator*> aggregators() const override { return gradients_.aggregators(); }
  void save(Checkpoint& checkpoint) const override {
    checkpoint.floats["velocity"] = host_floats(velocity_);
    checkpoint.floats["local_velocity"] = host_floats(gradients_.averager().local_velocity());
    save_residuals(checkpoint, gradients_.residuals());
  }
  void load(const Checkpoint& checkpoint) override {
    const auto& velocity = checkpoint.float_section("velocity");
    SPARSGD_ENFORCE_EQ(velocity.size(), gradients_.size(), "checkpoint velocity does not fit the model");
    gradients_.averager().set_local_velocity(
        device_floats(checkpoint.float_section("local_velocity"), gradients_.flat().device()));
    velocity_.copy_(device_floats(velocity, gradients_.flat().device()));
    gradients_.set_residuals(load_residuals(checkpoint));
  }

 private:
  SgdConfig sgd_;
  DeviceGradients gradients_;
  torch::Tensor velocity_;
};

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
  std::vector<const collectives::Aggregator*> aggregators() const override { return aggregators_of(optimizer_.averager()); }
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
template <typename Optimizer, typename Options, typename State, typename Gradients>
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
  void set_density(double density) override { sync_.set_density(density); }
  double density() const override { return sync_.density(); }
  FlatParameters& flat() override { return sync_.flat(); }
  std::vector<const collectives::Aggregator*> aggregators() const override { return sync_.aggregators(); }

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
    save_residuals(checkpoint, sync_.residuals());
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
    sync_.set_residuals(load_residuals(checkpoint));
  }

 private:
  static ModelAveragerConfig config(const collectives::ExchangeConfig& exchange, const SgdConfig& sgd) {
    SPARSGD_ENFORCE(sgd.momentum_correction == false && sgd.nesterov == false,
                    "momentum correction and Nesterov momentum belong to --optimizer sgd");
    return averager_config(exchange, sgd);
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
    const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(out, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
  }
  static torch::Tensor copy_in(const float* in, const torch::Tensor& like) {
    torch::Tensor t = torch::empty(like.sizes(), torch::kFloat32);
    std::memcpy(t.data_ptr<float>(), in, static_cast<std::size_t>(t.numel()) * sizeof(float));
    return t.to(like.device());
  }

  std::vector<torch::Tensor> parameters_;
  Gradients sync_;
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
                                                           const SgdConfig& sgd, bool device_path) {
  SPARSGD_ENFORCE(!parameters.empty(), "the model has no parameters");
  // Parameters on a GPU take the device path; on the CPU the host engine, unless asked otherwise.
  const bool device = device_path || !parameters.front().device().is_cpu();
  using Adam = torch::optim::Adam;
  using AdamW = torch::optim::AdamW;
  using AdamOptions = torch::optim::AdamOptions;
  using AdamWOptions = torch::optim::AdamWOptions;
  using AdamState = torch::optim::AdamParamState;
  using AdamWState = torch::optim::AdamWParamState;
  if (name == "sgd") {
    if (device) {
      return std::make_unique<DeviceSgdTrainingOptimizer>(transport, std::move(parameters), std::move(names), exchange, sgd);
    }
    return std::make_unique<SgdTrainingOptimizer>(transport, std::move(parameters), std::move(names), exchange, sgd);
  }
  if (name == "adam") {
    if (device) {
      return std::make_unique<TorchOptimizer<Adam, AdamOptions, AdamState, DeviceGradients>>(
          transport, std::move(parameters), std::move(names), exchange, sgd);
    }
    return std::make_unique<TorchOptimizer<Adam, AdamOptions, AdamState, HostGradients>>(
        transport, std::move(parameters), std::move(names), exchange, sgd);
  }
  if (name == "adamw") {
    if (device) {
      return std::make_unique<TorchOptimizer<AdamW, AdamWOptions, AdamWState, DeviceGradients>>(
          transport, std::move(parameters), std::move(names), exchange, sgd);
    }
    return std::make_unique<TorchOptimizer<AdamW, AdamWOptions, AdamWState, HostGradients>>(
        transport, std::move(parameters), std::move(names), exchange, sgd);
  }
  throw InvalidArgument("unknown optimizer '" + name + "' (expected sgd, adam or adamw)");
}

}  // namespace sparsgd::torch_layer
