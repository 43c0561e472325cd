#pragma once
// Option validators shared by the subcommands.

#include <charconv>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

// CLI11 converts "-5" into a huge unsigned value and saturates numbers beyond 64 bits; refuse
// both before conversion instead.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
          return std::string("must be a non-negative integer below 2^64, got '" + text + "'");
        }
        return std::string();
      },
      "UINT");
}

}  // namespace sparsgd::cli
