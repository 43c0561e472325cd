#pragma once
// The --auto-trials help that train and bench comm share, its numbers from the collectives layer.

#include <fmt/core.h>

#include <string>

#include "sparsgd/collectives/auto_select.hpp"

namespace sparsgd::cli {

inline std::string auto_trials_help() {
  return fmt::format(
      "auto: runs each candidate within {}x of the closed forms' cheapest {} times untimed, then times it at least this "
      "many times (more where fewer candidates are plausible, as the exchanges all {} candidates' trials would take allow) "
      "and keeps the fastest (trials within {:g}% of it: the cheaper closed form, unless the fastest beat it twice; those whose fastest is under the "
      "fastest's second-fastest run again, within those exchanges), trying again after {} settled "
      "exchanges, then twice as many each time up to every {}; 0: the closed forms' choice (reproducible)",
      collectives::kTrialFactor, collectives::kAutoWarmupRounds, collectives::auto_candidates().size(),
      100 * collectives::kTrialTieTolerance, collectives::kAutoRetrialFirst, collectives::kAutoRetrialMost);
}

}  // namespace sparsgd::cli
