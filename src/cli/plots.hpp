#pragma once
// PNG plots of training runs, drawn by gnuplot (Debian gnuplot-nox) from their CSV files.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

// Overlays the runs in `run_dirs` (each with epochs.csv and metrics.csv, and summary.json for its
// label) into PNGs in `out_dir`: accuracy and loss against epoch and against simulated time.
// Returns the files written. Throws Error if gnuplot is missing or fails.
std::vector<std::string> write_plots(const std::vector<std::string>& run_dirs, const std::string& out_dir);

void register_plot(CLI::App& app);

}  // namespace sparsgd::cli
