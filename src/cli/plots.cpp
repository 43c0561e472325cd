#include <CLI/CLI.hpp>

#include "cli/plots.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/gnuplot.hpp"
#include "cli/validators.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::cli {
namespace {

namespace fs = std::filesystem;

// A run's CSV records and summary: far below this even for runs of millions of iterations.
constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{4} << 30;

// The run's label from its summary.json (method, workers, density), or the directory's name. Only
// text: it reaches gnuplot through gnuplot_text_literal.
std::string label_of(const fs::path& dir) {
  if (fs::exists(dir / "summary.json")) {
    try {
      const auto doc = nlohmann::json::parse(read_regular_file(dir / "summary.json", kMaxRecordBytes, "summary"));
      return fmt::format("{} P={} d={}", doc.at("method").get<std::string>(), doc.at("workers").get<int>(),
                         doc.at("density").get<double>());
    } catch (const std::exception&) {
      // Fall through to the directory name.
    }
  }
  const auto name = fs::absolute(dir).lexically_normal().filename().string();
  return name.empty() ? fs::absolute(dir).lexically_normal().parent_path().filename().string() : name;
}

// Columns `x` and `y` (1-based) of a CSV file with a header line, as numbers. A field that is not
// a number is an error naming the file and line, except in a last line cut short (no newline: a
// run killed while writing it), which is skipped.
std::vector<std::vector<double>> read_columns(const fs::path& file, int x, int y) {
  const std::string all = read_regular_file(file, kMaxRecordBytes, "run record");
  std::vector<std::vector<double>> rows;
  std::size_t begin = all.find('\n');
  for (std::size_t line = 2; begin != std::string::npos && begin + 1 < all.size(); ++line) {
    const std::size_t end = all.find('\n', begin + 1);
    const std::string_view row(all.data() + begin + 1, (end == std::string::npos ? all.size() : end) - begin - 1);
    begin = end;
    std::vector<double> fields;
    bool ok = true;
    for (std::size_t at = 0; at <= row.size();) {
      const std::size_t comma = std::min(row.find(',', at), row.size());
      double value = 0.0;
      const auto [ptr, ec] = std::from_chars(row.data() + at, row.data() + comma, value);
      ok = ok && ec == std::errc() && ptr == row.data() + comma;
      fields.push_back(value);
      at = comma + 1;
    }
    const auto needed = static_cast<std::size_t>(std::max(x, y));
    if (!ok || fields.size() < needed) {
      if (end == std::string::npos) break;  // torn last line
      throw InvalidData(fmt::format("{}:{}: expected at least {} numeric fields", file.string(), line, needed));
    }
    rows.push_back({fields[static_cast<std::size_t>(x - 1)], fields[static_cast<std::size_t>(y - 1)]});
  }
  return rows;
}

}  // namespace

PlotsWritten write_plots(const std::vector<std::string>& run_dirs, const std::string& out_dir) {
  SPARSGD_ENFORCE(!run_dirs.empty(), "no run directories to plot");
  for (const auto& dir : run_dirs) {
    if (!fs::exists(fs::path(dir) / "epochs.csv")) {
      throw InvalidArgument("'" + dir + "' is not a training run directory (no epochs.csv)");
    }
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
  // The data goes inline, so the script is self-contained: `gnuplot plots.gnuplot` in out_dir redraws.
  std::string script = "set terminal pngcairo size 900,600 noenhanced\nset grid\n";
  std::vector<std::string> labels;
  // has_points[i][p]: run i has a finite point for plot p.
  std::vector<std::vector<bool>> has_points(run_dirs.size(), std::vector<bool>(plots.size(), false));
  for (std::size_t i = 0; i < run_dirs.size(); ++i) {
    const fs::path dir(run_dirs[i]);
    labels.push_back(gnuplot_text_literal(label_of(dir)));
    for (std::size_t p = 0; p < plots.size(); ++p) {
      auto rows = read_columns(dir / plots[p].csv, plots[p].x, plots[p].y);
      std::erase_if(rows, [](const std::vector<double>& row) { return !std::isfinite(row[0]) || !std::isfinite(row[1]); });
      // Epoch indices are 0-based in the CSV; plot the end of epoch e at e + 1.
      if (plots[p].x == 1) {
        for (auto& row : rows) row[0] += 1;
      }
      has_points[i][p] = !rows.empty();
      script += gnuplot_datablock(fmt::format("run{}_plot{}", i, p), rows);
    }
    if (std::none_of(has_points[i].begin(), has_points[i].end(), [](bool b) { return b; })) {
      throw InvalidData("nothing to plot in " + run_dirs[i] +
                        ": its epochs.csv and metrics.csv hold no finite value (no epoch finished and no iteration "
                        "recorded, or only NaN)");
    }
  }
  PlotsWritten result;
  std::vector<std::string> names;
  for (std::size_t p = 0; p < plots.size(); ++p) {
    const Plot& plot = plots[p];
    std::vector<std::size_t> shown;
    for (std::size_t i = 0; i < run_dirs.size(); ++i) {
      if (has_points[i][p]) shown.push_back(i);
    }
    if (shown.empty()) {
      std::error_code ignored;
      fs::remove(fs::path(out_dir) / plot.file, ignored);  // an earlier drawing must not pass for this one
      result.skipped.push_back(plot.file + ": no finite point in " +
                               (run_dirs.size() == 1 ? "the run's " : "any run's ") + plot.csv);
      continue;
    }
    // Accuracy rises and loss falls: keep the key out of the curves' way.
    script += plot.ylabel.find("accuracy") != std::string::npos ? "set key bottom right\n" : "set key top right\n";
    script += fmt::format("set output {}\nset title {}\nset xlabel {}\nset ylabel {}\n", gnuplot_text_literal(plot.file),
                          gnuplot_text_literal(plot.title), gnuplot_text_literal(plot.xlabel),
                          gnuplot_text_literal(plot.ylabel));
    script += plot.csv == "epochs.csv" ? "set xtics\n" : "";
    script += "plot ";
    for (const std::size_t i : shown) {
      script += fmt::format("{}$run{}_plot{} using 1:2 with {} title {}", i != shown.front() ? ", " : "", i, p,
                            plot.csv == "metrics.csv" ? "lines lw 1" : "linespoints lw 2", labels[i]);
    }
    script += "\nunset output\n";
    names.push_back(plot.file);
  }
  // gnuplot's chatter (a one-point series warns of an empty range) goes to a log beside the plots.
  run_gnuplot(out_dir, "plots.gnuplot", script, "plots.log", names);
  for (const auto& name : names) result.files.push_back((fs::path(out_dir) / name).string());
  return result;
}

void register_plot(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "Overlay training runs: accuracy and loss against epoch and simulated time");
  cmd->add_option("runs", *dirs, "run directories (written by sparsgd train --out)")->check(non_empty_path())->required();
  cmd->add_option("--out", *out, "where to write the PNGs (default: the first run's directory)")->check(non_empty_path());
  cmd->callback([dirs, out] {
    const std::string target = out->empty() ? dirs->front() : *out;
    const PlotsWritten plots = write_plots(*dirs, target);
    for (const auto& file : plots.files) fmt::print("wrote {}\n", file);
    for (const auto& why : plots.skipped) std::fprintf(stderr, "sparsgd: note: no plot %s\n", why.c_str());
  });
}

}  // namespace sparsgd::cli
