#pragma once
// The exchange's options on a subcommand (`train`, `bench comm`): one registration, bound to a
// collectives::ExchangeOptions, with the library's help texts (collectives/exchange_options.hpp),
// which also parses and validates them.

#include <CLI/CLI.hpp>

#include "cli/validators.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/exchange_options.hpp"

namespace sparsgd::cli {

inline void add_exchange_options(CLI::App* cmd, collectives::ExchangeOptions& o) {
  using collectives::exchange_option_help;
  cmd->add_option("--compressor", o.compressor, exchange_option_help("--compressor"))->capture_default_str();
  add_on_off_option(cmd, "--error-feedback", o.error_feedback, exchange_option_help("--error-feedback"));
  cmd->add_option("--aggregator", o.aggregator, exchange_option_help("--aggregator"))->capture_default_str();
  cmd->add_option("--auto-trials", o.auto_trials, exchange_option_help("--auto-trials"))
      ->check(CLI::Range(0, collectives::kMaxAutoTrialRounds))
      ->capture_default_str();
  cmd->add_option("--index-coding", o.index_coding, exchange_option_help("--index-coding"))->capture_default_str();
  cmd->add_option("--density", o.density, exchange_option_help("--density"))->capture_default_str();
  cmd->add_option("--r-factor", o.r_factor, exchange_option_help("--r-factor"))->capture_default_str();
  cmd->add_option("--threshold-period", o.threshold_period, exchange_option_help("--threshold-period"))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--network", o.network, exchange_option_help("--network"))->capture_default_str();
}

}  // namespace sparsgd::cli
