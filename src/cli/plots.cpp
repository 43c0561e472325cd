#include <CLI/CLI.hpp>

#include "cli/plots.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "sparsgd/core/error.hpp"

namespace sparsgd::cli {
namespace {

namespace fs = std::filesystem;

std::string label_of(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  if (in) {
    try {
      const auto doc = nlohmann::json::parse(in);
      return fmt::format("{} P={} d={}", doc.at("method").get<std::string>(), doc.at("workers").get<int>(),
                         doc.at("density").get<double>());
    } catch (const std::exception&) {
      // Fall through to the directory name.
    }
  }
  return dir.filename().string();
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<std::string> write_plots(const std::vector<std::string>& run_dirs, const std::string& out_dir) {
  SPARSGD_ENFORCE(!run_dirs.empty(), "no run directories to plot");
  for (const auto& dir : run_dirs) {
    if (!fs::exists(fs::path(dir) / "epochs.csv")) {
      throw InvalidArgument("'" + dir + "' is not a training run directory (no epochs.csv)");
    }
  }
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    throw Error("gnuplot is not installed (install it with: apt-get install gnuplot-nox)");
  }
  fs::create_directories(out_dir);
  struct Plot {
    std::string file, title, xlabel, ylabel, csv;
    int x, y;
  };
  const std::vector<Plot> plots = {
      {"accuracy_vs_epoch.png", "Test accuracy", "epoch", "test accuracy", "epochs.csv", 1, 5},
      {"loss_vs_epoch.png", "Training loss", "epoch", "train loss", "epochs.csv", 1, 3},
      {"accuracy_vs_simulated_time.png", "Test accuracy against simulated time", "simulated time (s)", "test accuracy",
       "epochs.csv", 7, 5},
      {"loss_vs_simulated_time.png", "Training loss (rank 0 batches) against simulated time", "simulated time (s)",
       "batch loss", "metrics.csv", 10, 3},
  };
  std::ostringstream script;
  script << "set terminal pngcairo size 900,600 noenhanced\nset datafile separator ','\n"
            "set grid\n";
  std::vector<std::string> written;
  for (const Plot& plot : plots) {
    const std::string file = (fs::path(out_dir) / plot.file).string();
    // Accuracy rises and loss falls: keep the key out of the curves' way.
    script << (plot.ylabel.find("accuracy") != std::string::npos ? "set key bottom right\n" : "set key top right\n");
    script << "set output " << quoted(file) << "\nset title " << quoted(plot.title) << "\nset xlabel "
           << quoted(plot.xlabel) << "\nset ylabel " << quoted(plot.ylabel) << "\n";
    script << (plot.csv == "epochs.csv" ? "set xtics\n" : "");
    // Epoch indices are 0-based in the CSV; plot the end of epoch e at e + 1.
    const std::string x = plot.x == 1 ? "($1+1)" : "" + std::to_string(plot.x);
    script << "plot ";
    for (std::size_t i = 0; i < run_dirs.size(); ++i) {
      const fs::path dir(run_dirs[i]);
      if (i > 0) script << ", ";
      script << quoted((dir / plot.csv).string()) << " every ::1 using " << x << ":" << plot.y << " with "
             << (plot.csv == "metrics.csv" ? "lines lw 1" : "linespoints lw 2") << " title " << quoted(label_of(dir));
    }
    script << "\n";
    written.push_back(file);
  }
  const std::string script_file = (fs::path(out_dir) / "plots.gnuplot").string();
  std::ofstream(script_file) << script.str();
  // gnuplot's chatter (a one-point series warns of an empty range) goes to a log beside the plots.
  const std::string log_file = (fs::path(out_dir) / "plots.log").string();
  const std::string command = "gnuplot " + quoted(script_file) + " >" + quoted(log_file) + " 2>&1";
  if (std::system(command.c_str()) != 0) throw Error("gnuplot failed on " + script_file + " (see " + log_file + ")");
  return written;
}

void register_plot(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "Overlay training runs: accuracy and loss against epoch and simulated time");
  cmd->add_option("runs", *dirs, "run directories (written by sparsgd train --out)")->required();
  cmd->add_option("--out", *out, "where to write the PNGs (default: the first run's directory)");
  cmd->callback([dirs, out] {
    const std::string target = out->empty() ? dirs->front() : *out;
    for (const auto& file : write_plots(*dirs, target)) fmt::print("wrote {}\n", file);
  });
}

}  // namespace sparsgd::cli
