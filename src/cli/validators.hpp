#pragma once
// Option validators shared by the subcommands.

#include <charconv>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "sparsgd/collectives/descriptor.hpp"

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

// An option that switches something on or off, spelled on|off (so that a default of "on" can be
// turned off, which a flag cannot).
inline CLI::Option* add_on_off_option(CLI::App* cmd, const std::string& name, bool& value, const std::string& help) {
  return cmd->add_option_function<std::string>(name, [&value](const std::string& v) { value = v == "on"; }, help)
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str(value ? "on" : "off");
}

// A path option given as '' (an unset shell variable, say) would silently mean "the default" or
// "nowhere": refuse it.
inline CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& text) {
        return text.empty() ? std::string("must name a file or directory, got an empty string") : std::string();
      },
      "");
}

// CLI11 reads integers with base prefixes ("010" is 8, "0x10" is 16). Numbers here are decimal:
// leading zeros are dropped ("010" is 10) and anything but an optional sign and digits is refused.
inline CLI::Validator decimal_integer() {
  return CLI::Validator(
      [](std::string& text) {
        std::size_t at = text.empty() || (text[0] != '-' && text[0] != '+') ? 0 : 1;
        const std::size_t digits = at;
        if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos) {
          return std::string("must be a decimal integer, got '" + text + "'");
        }
        while (at + 1 < text.size() && text[at] == '0') ++at;
        text.erase(digits, at - digits);
        return std::string();
      },
      "");
}

// Every integer option of `app` and its subcommands, whatever registered it, reads decimal only.
inline void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) option->transform(decimal_integer());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_integers(*sub);
}


}  // namespace sparsgd::cli
