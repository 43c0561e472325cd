#pragma once
// The exchange's options as a user gives them: the CLI's flags (`train`, `bench comm`), the Python
// package's keywords and the trainer's configuration all hold one ExchangeOptions, and this one
// spec turns it into an ExchangeConfig: it parses the names and numbers, validates them and their
// combinations once, and derives the settings no front end should derive its own way (the shared
// seed, auto's network, the threshold period). The options' help texts live here too, read from the
// registries, so that every front end describes them alike.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparsgd/collectives/gradient_exchange.hpp"

namespace sparsgd::collectives {

struct ExchangeOptions {
  std::string compressor = "topk";
  std::string aggregator = "gtopk";
  double density = 0.001;
  double r_factor = 4.0;                // rtopk: r = ceil(r_factor * k)
  std::uint64_t threshold_period = 32;  // topk-reuse
  bool error_feedback = true;
  std::string index_coding = "raw";
  int auto_trials = 2;                  // auto: timed trial rounds per candidate (0: the closed forms alone)
  // A network model (transport/network_model.hpp): auto chooses for it where it has a bandwidth,
  // and measures the real network otherwise.
  std::string network = "none";
  // Whether every worker draws the same random indices; unset: where the aggregator needs it.
  std::optional<bool> shared_seed;
};

// The ExchangeConfig these options ask for, with `seed` for the random compressors. Throws
// InvalidArgument naming the option for an unknown name, a number out of range, or a combination
// that cannot work (validate(ExchangeConfig)).
ExchangeConfig make_exchange_config(const ExchangeOptions& options, std::uint64_t seed);

// The index codings and the auto trial rounds the options accept, for front ends that check types
// before they call make_exchange_config.
const std::vector<std::string>& index_coding_names();

// Every option, named as the CLI names it ("--aggregator"), with its value as text: what ranks
// compare at start-up and what a run records.
std::vector<std::pair<std::string, std::string>> exchange_option_fields(const ExchangeOptions& options);

// The options' flags and help texts, in the order the CLI lists them (the names' lists come from
// the registries).
struct ExchangeOptionHelp {
  std::string_view flag;  // "--index-coding"
  std::string help;
};
const std::vector<ExchangeOptionHelp>& exchange_option_help();
const std::string& exchange_option_help(std::string_view flag);

}  // namespace sparsgd::collectives
