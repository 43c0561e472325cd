#pragma once
// Each subcommand registers its options and its action on the CLI11 app.

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

void register_bench_select(CLI::App& bench);
void register_bench_comm(CLI::App& bench);
void register_train(CLI::App& app);
void register_simulate(CLI::App& app);
void register_plot(CLI::App& app);

}  // namespace sparsgd::cli
