#include "sparsgd/collectives/exchange_options.hpp"

#include <algorithm>
#include <cstdio>

#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/descriptor_list.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::collectives {
namespace {

std::string auto_trials_help() {
  char text[1024];
  std::snprintf(text, sizeof text,
                "auto: runs each candidate within %gx of the closed forms' cheapest %d times untimed, then times it at "
                "least this many times (more where fewer candidates are plausible, as the exchanges all %zu candidates' "
                "trials would take allow) and keeps the fastest (trials within %g%% of it: the cheaper closed form, "
                "unless the fastest beat it twice; those whose fastest is under the fastest's second-fastest run again, "
                "within those exchanges), trying again after %llu settled exchanges, then twice as many each time up to "
                "every %llu; 0: the closed forms' choice (reproducible)",
                kTrialFactor, kAutoWarmupRounds, auto_candidates().size(), 100 * kTrialTieTolerance,
                static_cast<unsigned long long>(kAutoRetrialFirst), static_cast<unsigned long long>(kAutoRetrialMost));
  return text;
}

std::string index_coding_help() {
  return "raw (32 bits an index) or compressed (gaps packed in blocks, or a bitmap, whichever is smaller: about 13 "
         "bits an index at density 0.001); " +
         aggregator_choices([](const AggregatorDescriptor& d) { return d.properties.sends_indices; }) +
         " send indices";
}

}  // namespace

const std::vector<std::string>& index_coding_names() {
  static const std::vector<std::string> names = {"raw", "compressed"};
  return names;
}

ExchangeConfig make_exchange_config(const ExchangeOptions& o, std::uint64_t seed) {
  const AggregatorDescriptor& aggregator = find_aggregator(o.aggregator);
  compress::find_compressor(o.compressor);
  validate_density(o.density);
  SPARSGD_ENFORCE(o.auto_trials >= 0 && o.auto_trials <= kMaxAutoTrialRounds,
                  "--auto-trials must be 0 to " << kMaxAutoTrialRounds << ", not " << o.auto_trials);
  ExchangeConfig config;
  config.compressor.name = o.compressor;
  config.compressor.r_factor = o.r_factor;
  config.compressor.seed = seed;
  config.compressor.shared_seed = o.shared_seed.value_or(aggregator.properties.needs_shared_indices);
  config.compressor.threshold_period = o.threshold_period;
  config.aggregator = o.aggregator;
  config.density = o.density;
  config.error_feedback = o.error_feedback;
  config.index_coding = wire::parse_index_coding(o.index_coding);
  config.auto_trial_rounds = o.auto_trials;
  // auto chooses for the simulated network where there is one, else measures the real one.
  const transport::NetworkSpec network = transport::parse_network(o.network);
  if (network.enabled()) config.network = {network.alpha_seconds, 1.0 / network.bytes_per_second, true, false};
  validate(config);
  return config;
}

std::vector<std::pair<std::string, std::string>> exchange_option_fields(const ExchangeOptions& o) {
  const auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
  return {{"--compressor", o.compressor},
          {"--r-factor", field_value(o.r_factor)},
          {"--threshold-period", std::to_string(o.threshold_period)},
          {"--error-feedback", on_off(o.error_feedback)},
          {"--aggregator", o.aggregator},
          {"--auto-trials", std::to_string(o.auto_trials)},
          {"--index-coding", o.index_coding},
          {"--density", field_value(o.density)},
          {"--network", o.network}};
}

const std::vector<ExchangeOptionHelp>& exchange_option_help() {
  static const std::vector<ExchangeOptionHelp> all = {
      {"--compressor", compress::compressor_help()},
      {"--error-feedback", "on: what a worker did not get into the sum stays in its residual; off: it is dropped"},
      {"--aggregator", aggregator_help()},
      {"--auto-trials", auto_trials_help()},
      {"--index-coding", index_coding_help()},
      {"--density", "fraction of gradient entries each worker sends, in (0, 1]"},
      {"--r-factor", "rtopk: r = ceil(r_factor * k)"},
      {"--threshold-period",
       "topk-reuse: exact top-k every this many iterations, one filter pass against its threshold between"},
      {"--network", "simulated network: none, 1gbe, 10gbe, paper-1gbe or alpha=SECONDS,bw=BITS_PER_SECOND"},
  };
  return all;
}

const std::string& exchange_option_help(std::string_view flag) {
  for (const ExchangeOptionHelp& option : exchange_option_help()) {
    if (option.flag == flag) return option.help;
  }
  throw InvalidArgument("no exchange option " + std::string(flag));
}

}  // namespace sparsgd::collectives
