#pragma once
// Each subcommand registers its options and its action on the CLI11 app.

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

void register_bench_select(CLI::App& bench);
void register_bench_comm(CLI::App& bench);
void register_train(CLI::App& app);
inline constexpr const char* kTrainDescription =
    "Train a model (Fashion-MNIST, CIFAR-10, a word-level language model, or your TorchScript model), "
    "data-parallel, with sparse gradient exchange (in-process workers, or one per rank under mpirun)";
void register_simulate(CLI::App& app);
void register_plot(CLI::App& app);
void register_list(CLI::App& app);

}  // namespace sparsgd::cli
