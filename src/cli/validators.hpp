#pragma once
// Option validators shared by the subcommands.

#include <string>

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

// CLI11 converts "-5" into a huge unsigned value; refuse a sign before conversion instead.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) {
        if (!text.empty() && text.front() == '-') return std::string("must be a non-negative integer, got " + text);
        return std::string();
      },
      "UINT");
}

}  // namespace sparsgd::cli
