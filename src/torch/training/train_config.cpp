#include "sparsgd/torch/train_config.hpp"
#include "sparsgd/torch/worker_device.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "../tasks/tasks.hpp"
#include "schedules.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/training/fault_plan.hpp"
#include "sparsgd/torch/models.hpp"
#include "sparsgd/torch/task.hpp"
#include "sparsgd/torch/training_optimizer.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::torch_layer {
namespace {

struct ConfigField {
  std::string flag, value;
  bool defines_run;  // a resumed run must have the same value
};

// Every option, named as the CLI names it, described once: the check that ranks agree reads them
// all, the checkpoint fingerprint those that define the run.
std::vector<ConfigField> config_fields(const TrainConfig& given) {
  using collectives::field_value;
  const TrainConfig c = with_task_defaults(given);
  const auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
  std::vector<ConfigField> fields = {{"--task", c.task, true},
          {"--model", c.model, true},
          {"--bptt", std::to_string(c.bptt), true},
          {"--hidden-size", std::to_string(c.hidden_size), true},
          {"--tied", on_off(c.tied), true},
          {"--dropout", field_value(c.dropout), true},
          {"--clip-norm", field_value(c.clip_norm), true},
          {"--validation", std::to_string(c.validation), true},
          {"--warmup-density", field_value(c.warmup_density), true},
          {"--warmup-density-epochs", field_value(c.warmup_density_epochs), true},
          {"--epochs", std::to_string(c.epochs), true},
          {"--batch-size", std::to_string(c.batch_size), true},
          {"--lr", field_value(c.lr), true},
          {"--optimizer", c.optimizer, true},
          {"--momentum", field_value(c.momentum), true},
          {"--nesterov", on_off(c.nesterov), true},
          {"--weight-decay", field_value(c.weight_decay), true},
          {"--warmup-epochs", field_value(c.warmup_epochs), true},
          {"--lr-schedule", c.lr_schedule, true},
          {"--momentum-correction", on_off(uses_momentum_correction(c)), true},
          {"--per-layer", on_off(c.per_layer), true},
          {"--seed", std::to_string(c.seed), true},
          {"--out", c.out_dir, false},
          {"--checkpoint-every", std::to_string(c.checkpoint_every), false},
          {"--resume", c.resume_dir, false},
          {"--max-iters", std::to_string(c.max_iters), false},
          {"--timeout-ms", std::to_string(c.timeout_ms), false},
          {"--on-nonfinite", c.on_nonfinite, false},
          {"--inject-fault", c.inject_fault, false}};
  // The exchange's options where they have always stood (the fingerprint of a checkpoint lists the
  // fields in this order): all but --network after --validation, --network after --per-layer.
  const auto exchange = collectives::exchange_option_fields(c.exchange);
  const auto after = [&fields](std::string_view flag) {
    return std::find_if(fields.begin(), fields.end(), [flag](const ConfigField& f) { return f.flag == flag; }) + 1;
  };
  std::vector<ConfigField> rest;
  for (auto& [flag, value] : exchange) {
    if (flag == "--network") {
      fields.insert(after("--per-layer"), {flag, value, true});
    } else {
      rest.push_back({flag, value, true});
    }
  }
  fields.insert(after("--validation"), rest.begin(), rest.end());
  return fields;
}

}  // namespace

TaskRecipe task_recipe(const std::string& task) {
  const auto& tasks = task_names();
  SPARSGD_ENFORCE(std::find(tasks.begin(), tasks.end(), task) != tasks.end(), "unknown --task '" << task << "'");
  if (task == "lm") return {"adam", 0.008, 0.0, 0.25, 0.3, 10};
  const TrainConfig defaults;
  return {defaults.optimizer, defaults.lr, defaults.weight_decay, defaults.clip_norm, defaults.dropout,
          defaults.batch_size};
}

void apply_task_recipe(TrainConfig& c, const std::function<bool(std::string_view flag)>& given) {
  const auto& tasks = task_names();
  if (std::find(tasks.begin(), tasks.end(), c.task) == tasks.end()) return;  // validate() names it
  const TaskRecipe recipe = task_recipe(c.task);
  if (!given("--optimizer")) c.optimizer = recipe.optimizer;
  if (!given("--lr")) c.lr = recipe.lr;
  if (!given("--weight-decay")) c.weight_decay = recipe.weight_decay;
  if (!given("--clip-norm")) c.clip_norm = recipe.clip_norm;
  if (!given("--dropout")) c.dropout = recipe.dropout;
  if (!given("--batch-size")) c.batch_size = recipe.batch_size;
}

std::string task_recipes_help() {
  std::ostringstream os;
  for (const std::string& task : task_names()) {
    const TaskRecipe r = task_recipe(task);
    os << (task == task_names().front() ? "" : "; ") << task << ": --optimizer " << r.optimizer << " --lr " << r.lr
       << " --weight-decay " << r.weight_decay << " --clip-norm " << r.clip_norm << " --dropout " << r.dropout
       << " --batch-size " << r.batch_size;
  }
  return os.str();
}

TrainConfig with_task_defaults(TrainConfig c) {
  if (c.model.empty()) c.model = default_model(c.task);
  if (c.data_dir.empty()) c.data_dir = default_data_dir(c.task);
  return c;
}

std::string fingerprint(const TrainConfig& c, int workers) {
  std::ostringstream os;
  for (const auto& field : config_fields(c)) {
    if (field.defines_run) os << field.flag << '=' << field.value << '|';
  }
  os << "--workers=" << workers;
  return os.str();
}

std::vector<std::pair<std::string, std::string>> run_config_fields(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& field : config_fields(c)) out.emplace_back(std::move(field.flag), std::move(field.value));
  return out;
}

void validate(const TrainConfig& c) {
  SPARSGD_ENFORCE(c.workers >= 1 && c.workers <= 1024, "--workers must be in [1, 1024], got " << c.workers);
  const auto& tasks = task_names();
  SPARSGD_ENFORCE(std::find(tasks.begin(), tasks.end(), c.task) != tasks.end(),
                  "unknown --task '" << c.task << "' (expected fashion-mnist, cifar10 or lm)");
  const std::string model = c.model.empty() ? default_model(c.task) : c.model;
  if (!is_scripted_model(model)) {
    const bool image_model = std::find(model_names().begin(), model_names().end(), model) != model_names().end();
    SPARSGD_ENFORCE(c.task == "lm" ? model == "lstm" : image_model,
                    "--model " << model << " is not a model of --task " << c.task << " (expected " << models_of(c.task)
                               << ")");
  }
  check_device(c.device);
  SPARSGD_ENFORCE(c.device == "cpu" || c.task != "lm",
                  "--task lm trains on the CPU only (--device cpu); the image tasks train on a GPU");
  SPARSGD_ENFORCE(c.bptt >= 1, "--bptt must be at least 1, got " << c.bptt);
  SPARSGD_ENFORCE(c.hidden_size >= 1 && c.hidden_size <= 65536, "--hidden-size must be in [1, 65536], got " << c.hidden_size);
  SPARSGD_ENFORCE(std::isfinite(c.dropout) && c.dropout >= 0.0 && c.dropout < 1.0,
                  "--dropout must be in [0, 1), got " << c.dropout);
  SPARSGD_ENFORCE(std::isfinite(c.clip_norm) && c.clip_norm >= 0.0, "--clip-norm must be >= 0 (0: none), got " << c.clip_norm);
  SPARSGD_ENFORCE(c.validation >= 0, "--validation must be >= 0 (0: none), got " << c.validation);
  SPARSGD_ENFORCE(c.validation == 0 || c.task != "lm",
                  "--validation holds out training examples of an image task; --task lm evaluates on valid.txt");
  collectives::make_exchange_config(c.exchange, c.seed);
  if (c.warmup_density != 0.0) validate_density(c.warmup_density);
  SPARSGD_ENFORCE(std::isfinite(c.warmup_density_epochs) && c.warmup_density_epochs > 0.0,
                  "--warmup-density-epochs must be a positive number of epochs, got " << c.warmup_density_epochs);
  const auto& optimizers = training_optimizer_names();
  SPARSGD_ENFORCE(std::find(optimizers.begin(), optimizers.end(), c.optimizer) != optimizers.end(),
                  "unknown --optimizer '" << c.optimizer << "' (expected sgd, adam or adamw)");
  SPARSGD_ENFORCE(c.momentum_correction == "auto" || c.momentum_correction == "on" || c.momentum_correction == "off",
                  "--momentum-correction must be auto, on or off, got '" << c.momentum_correction << "'");
  SPARSGD_ENFORCE(c.optimizer == "sgd" || (c.momentum_correction != "on" && !c.nesterov),
                  "--momentum-correction on and --nesterov belong to --optimizer sgd, not " << c.optimizer);
  SPARSGD_ENFORCE(c.epochs >= 1, "--epochs must be at least 1, got " << c.epochs);
  SPARSGD_ENFORCE(c.batch_size >= 1, "--batch-size must be at least 1, got " << c.batch_size);
  SPARSGD_ENFORCE(std::isfinite(c.lr) && c.lr > 0.0, "--lr must be a positive number, got " << c.lr);
  SPARSGD_ENFORCE(std::isfinite(c.momentum) && c.momentum >= 0.0 && c.momentum < 1.0,
                  "--momentum must be in [0, 1), got " << c.momentum);
  SPARSGD_ENFORCE(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0,
                  "--weight-decay must be >= 0, got " << c.weight_decay);
  SPARSGD_ENFORCE(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0.0,
                  "--warmup-epochs must be >= 0, got " << c.warmup_epochs);
  SPARSGD_ENFORCE(c.lr_schedule == "none" || c.lr_schedule == "step" || c.lr_schedule == "cosine",
                  "unknown --lr-schedule '" << c.lr_schedule << "' (expected none, step or cosine)");
  SPARSGD_ENFORCE(c.checkpoint_every >= 0, "--checkpoint-every must be >= 0, got " << c.checkpoint_every);
  SPARSGD_ENFORCE(c.checkpoint_every == 0 || !c.out_dir.empty(), "--checkpoint-every needs --out DIR");
  SPARSGD_ENFORCE(c.timeout_ms >= 1, "--timeout-ms must be at least 1");
  SPARSGD_ENFORCE(c.on_nonfinite == "stop" || c.on_nonfinite == "skip",
                  "unknown --on-nonfinite '" << c.on_nonfinite << "' (expected stop or skip)");
  parse_fault_plan(c.inject_fault);
}

// auto: where the exchange is sparse. Where every entry is sent (a dense compressor, or density 1),
// momentum factor masking would zero the whole velocity every step, and S-SGD would train without
// momentum (82.79% against 87.16% after one epoch of the default cnn, seeds 1-3).
bool uses_momentum_correction(const TrainConfig& c) {
  if (c.momentum_correction != "auto") return c.momentum_correction == "on";
  const bool sparse = !compress::find_compressor(c.exchange.compressor).properties.dense && c.exchange.density < 1.0;
  return c.optimizer == "sgd" && sparse;
}

collectives::ExchangeConfig exchange_config(const TrainConfig& c) {
  collectives::ExchangeOptions first_epoch = c.exchange;
  first_epoch.density = density_at(c, 0.0);
  return collectives::make_exchange_config(first_epoch, c.seed);
}

}  // namespace sparsgd::torch_layer
