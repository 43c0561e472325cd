// `sparsgd list compressors|aggregators`: the registered names, one a line (with their summaries
// under --verbose, or everything their descriptors say under --json), so that scripts and tests
// enumerate what the registries hold instead of keeping lists of their own.

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/compress/descriptor.hpp"

namespace sparsgd::cli {

void register_list(CLI::App& app) {
  auto what = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("list", "The registered compressors or aggregators, one a line");
  cmd->add_option("what", *what, "compressors or aggregators")->required()->check(CLI::IsMember({"compressors", "aggregators"}));
  cmd->add_flag("--verbose", *verbose, "each with its one-line summary");
  cmd->add_flag("--json", *json, "one JSON array: each name with its summary and properties");
  cmd->callback([what, verbose, json] {
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      if (*what == "compressors") {
        for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
          nlohmann::json properties = nlohmann::json::object();
          for (const auto& [name, value] : compress::property_values(d->properties)) properties[std::string(name)] = value;
          out.push_back({{"name", d->name}, {"summary", d->summary}, {"properties", properties}});
        }
      } else {
        for (const collectives::AggregatorDescriptor* d : collectives::aggregator_descriptors()) {
          nlohmann::json properties = nlohmann::json::object();
          for (const collectives::PropertyValue& p : collectives::property_values(d->properties)) {
            properties[std::string(p.name)] = p.flag ? nlohmann::json(p.value != 0) : nlohmann::json(p.value);
          }
          out.push_back({{"name", d->name}, {"summary", d->summary}, {"wire_id", d->wire_id}, {"properties", properties}});
        }
      }
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    const auto print = [&](std::string_view name, std::string_view summary) {
      if (*verbose) {
        std::printf("%.*s: %.*s\n", static_cast<int>(name.size()), name.data(), static_cast<int>(summary.size()), summary.data());
      } else {
        std::printf("%.*s\n", static_cast<int>(name.size()), name.data());
      }
    };
    if (*what == "compressors") {
      for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) print(d->name, d->summary);
    } else {
      for (const collectives::AggregatorDescriptor* d : collectives::aggregator_descriptors()) print(d->name, d->summary);
    }
  });
}

}  // namespace sparsgd::cli
