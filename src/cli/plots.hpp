#pragma once
// PNG plots of training runs, drawn by gnuplot (Debian gnuplot-nox) from their CSV files.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sparsgd::cli {

struct PlotsWritten {
  std::vector<std::string> files;
  std::vector<std::string> skipped;  // "loss_vs_epoch.png: no finite point in any run's epochs.csv"
};

// Overlays the runs in `run_dirs` (each with epochs.csv and metrics.csv, and summary.json for its
// label) into PNGs in `out_dir`: accuracy and loss against epoch and against simulated time. Points
// that are not finite (a diverged run's NaN) are left out; a plot with no point left in any run is
// skipped, saying why, and a run with nothing to plot at all (no finished epoch, no iteration, or
// only NaN) is refused: InvalidData naming it. Throws Error if gnuplot is missing or fails.
PlotsWritten write_plots(const std::vector<std::string>& run_dirs, const std::string& out_dir);

void register_plot(CLI::App& app);

}  // namespace sparsgd::cli
