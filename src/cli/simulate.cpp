// `sparsgd simulate`: per-iteration time and scaling efficiency of dense S-SGD, Top-k S-SGD and
// gTop-k from the closed-form alpha-beta model, for the gTop-k paper's networks or given sizes.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/memory_report.hpp"
#include "cli/validators.hpp"
#include "cli/gnuplot.hpp"
#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/compress/error_feedback.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"
#include "sparsgd/training/memory.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/sim/scaling.hpp"

namespace sparsgd::cli {
namespace {

struct SimulateOptions {
  std::string model = "resnet50";
  std::vector<int> workers = {2, 4, 8, 16, 32};
  std::string network = "paper-1gbe";
  double density = 0.001;
  std::optional<double> params;      // overrides the preset
  std::optional<double> compute_ms;  // overrides the preset
  std::string compress_ms;    // a number, or "measured"; default: the preset's
  std::string index_coding = "raw";
  std::string out_dir;
  bool json = false;
};

// This library's compression side of one iteration at n: error-feedback accumulate, top-k, and
// the residual update, median of 5 on synthetic normal gradients.
double measured_compress_ms(std::size_t n, double density, MemoryUse& use) {
  validate_length(n);
  // Gradient, residual and top-k scratch, and the selection; measured against peak resident
  // memory in tests/reliability.
  MemoryEstimate memory;
  memory.add("gradient, residual and scratch (2.2 arrays of n floats)", 2.2 * 4.0 * static_cast<double>(n));
  memory.add("selection (8 x k pairs)", 8 * 8.0 * static_cast<double>(k_from_density(n, density)));
  memory.add("threads and allocator", 32.0 * (1 << 20));
  use.resident_before_bytes = resident_bytes();
  use.estimate_bytes = memory.total();
  require_memory("simulate --compress-ms measured", memory, "lower --params, or give --compress-ms in milliseconds");
  std::vector<float> gradient(n);
  fill_synthetic(gradient, Distribution::normal, 1);
  compress::ErrorFeedback feedback(n);
  auto compressor = compress::make_compressor({"topk"});
  const std::size_t k = k_from_density(n, density);
  SparseVector sent;
  std::vector<double> times;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const auto acc = feedback.accumulate(gradient);
    compressor->compress(acc, k, {static_cast<std::uint64_t>(r), 0}, sent);
    feedback.commit(sent);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  use.peak_resident_bytes = peak_resident_bytes();
  return benchmark::median(times);
}

double parse_ms(const std::string& text, const char* option) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string(option) + " must be a number of milliseconds >= 0 or 'measured', got '" + text + "'");
}

void run_simulate(const SimulateOptions& o) {
  const sim::ModelPreset* preset = nullptr;
  if (o.model != "custom") preset = &sim::find_preset(o.model);
  SPARSGD_ENFORCE(!o.workers.empty(), "--workers needs at least one worker count");
  for (const int p : o.workers) {
    SPARSGD_ENFORCE(p >= 1 && p <= 1 << 20, "--workers: each worker count must be in [1, 2^20], got " << p);
  }
  if (o.params) {
    SPARSGD_ENFORCE(std::isfinite(*o.params) && *o.params >= 1 && *o.params <= 4294967295.0,
                    "--params must be a gradient length in [1, 2^32 - 1], got " << *o.params);
    SPARSGD_ENFORCE(*o.params == std::floor(*o.params),
                    "--params must be a whole number of gradient entries (25e6 is one), got " << *o.params);
  }
  if (o.compute_ms) {
    SPARSGD_ENFORCE(std::isfinite(*o.compute_ms) && *o.compute_ms >= 0,
                    "--compute-ms must be a number of milliseconds >= 0, got " << *o.compute_ms);
  }
  const double params = o.params ? *o.params : preset ? preset->parameters : 0;
  SPARSGD_ENFORCE(params >= 1, "--params is required with --model custom");
  double compute = o.compute_ms.value_or(0.0);
  if (!o.compute_ms) {
    SPARSGD_ENFORCE(preset && preset->compute_ms, "--compute-ms is required: the preset '"
                                                     << o.model << "' has no published compute time");
    compute = *preset->compute_ms;
  }
  double compress = 0;
  std::string compress_source;
  std::optional<MemoryUse> memory;  // only the measurement allocates
  if (o.compress_ms == "measured") {
    validate_density(o.density);
    memory.emplace();
    compress = measured_compress_ms(static_cast<std::size_t>(params), o.density, *memory);
    compress_source = "measured here (this library)";
  } else if (!o.compress_ms.empty()) {
    compress = parse_ms(o.compress_ms, "--compress-ms");
    compress_source = "given";
  } else {
    SPARSGD_ENFORCE(preset && preset->compress_ms, "--compress-ms is required (a number or 'measured')");
    compress = *preset->compress_ms;
    compress_source = "published (gTop-k paper)";
  }
  validate_density(o.density);
  const transport::NetworkSpec network = transport::parse_network(o.network);
  const wire::IndexCoding coding = wire::parse_index_coding(o.index_coding);
  const auto rows = sim::scaling_table(params, compute, compress, o.density, o.workers, network, coding);
  // The paper's efficiencies hold for its own settings: once --params, --compute-ms or
  // --compress-ms changes one, they describe another run, and are not shown beside this one.
  std::vector<std::string> overrides;
  if (o.params && preset && *o.params != preset->parameters) overrides.push_back("--params");
  if (o.compute_ms && preset && preset->compute_ms != o.compute_ms) overrides.push_back("--compute-ms");
  if (coding != wire::IndexCoding::raw && preset) overrides.push_back("--index-coding");
  if (!o.compress_ms.empty() && preset && !(preset->compress_ms && compress_source == "given" && compress == *preset->compress_ms)) {
    overrides.push_back("--compress-ms");
  }
  auto paper = [&](const sim::ScalingRow& r) -> std::optional<double> {
    if (!preset || r.workers != 32 || !overrides.empty()) return std::nullopt;
    if (r.method == "dense") return preset->paper_dense;
    if (r.method == "allgather") return preset->paper_topk;  // the paper's Top-k S-SGD
    if (r.method == "gtopk") return preset->paper_gtopk;
    return std::nullopt;
  };
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      const auto p = paper(r);
      out.push_back({{"method", r.method}, {"workers", r.workers}, {"compute_ms", r.compute_ms},
                     {"compress_ms", r.compress_ms}, {"comm_ms", r.comm_ms}, {"iteration_ms", r.iteration_ms},
                     {"efficiency", r.efficiency}, {"paper_efficiency", p ? nlohmann::json(*p) : nlohmann::json()}});
    }
    const nlohmann::json doc = {{"sparsgd", build_identity()},
                                {"model", o.model},       {"parameters", params},
                                {"density", o.density},   {"network", network.name},
                                {"index_coding", o.index_coding},
                                {"compute_ms", compute},  {"compress_ms", compress},
                                {"compress_source", compress_source}, {"rows", out},
                                {"paper_figures_omitted_for", overrides},
                                {"memory", memory ? memory_json(*memory) : nlohmann::json()}};
    std::printf("%s\n", doc.dump().c_str());
  } else {
    fmt::print("simulate: {} ({:.3g} parameters), density {}, {} indices, network {}; compute {:.1f} ms, compression "
               "{:.1f} ms ({})\n",
               o.model, params, o.density, o.index_coding, network.name, compute, compress, compress_source);
    if (!overrides.empty()) {
      std::string names;
      for (const auto& name : overrides) names += (names.empty() ? "" : ", ") + name;
      fmt::print("(no paper column: {} changes the {} preset, whose published figures are for its own settings)\n",
                 names, o.model);
    }
    fmt::print("{:<9} {:>6} {:>12} {:>12} {:>12} {:>11} {:>9}\n", "method", "P", "comm ms", "compress ms", "iter ms",
               "efficiency", "paper");
    for (const auto& r : rows) {
      const auto p = paper(r);
      fmt::print("{:<9} {:>6} {:>12.2f} {:>12.2f} {:>12.2f} {:>10.1f}% {:>9}\n", r.method, r.workers, r.comm_ms,
                 r.compress_ms, r.iteration_ms, 100 * r.efficiency, p ? fmt::format("{:.1f}%", 100 * *p) : "");
    }
  }
  if (!o.out_dir.empty()) {
    const std::filesystem::path dir(o.out_dir);
    std::filesystem::create_directories(dir);
    std::string csv = "method,workers,comm_ms,compress_ms,iteration_ms,efficiency\n";
    for (const auto& r : rows) {
      csv += fmt::format("{},{},{},{},{},{}\n", r.method, r.workers, r.comm_ms, r.compress_ms, r.iteration_ms,
                         r.efficiency);
    }
    write_file_atomically(dir / "scaling.csv", csv);
    // One data block per method, so the methods' names come from the program, not from the CSV.
    std::vector<std::string> methods;
    for (const auto& r : rows) {
      if (methods.empty() || methods.back() != r.method) methods.push_back(r.method);
    }
    std::string script = "set terminal pngcairo size 900,600 noenhanced\nset output 'efficiency.png'\n";
    script += fmt::format("set title {}\n", gnuplot_text_literal("Scaling efficiency: " + o.model + " on " + network.name));
    script += "set xlabel 'workers'\nset ylabel 'efficiency'\nset logscale x 2\nset yrange [0:1.05]\nset grid\n"
              "set key bottom left\n";
    std::string plot = "plot ";
    for (std::size_t m = 0; m < methods.size(); ++m) {
      std::vector<std::vector<double>> points;
      for (const auto& r : rows) {
        if (r.method == methods[m]) points.push_back({static_cast<double>(r.workers), r.efficiency});
      }
      script += gnuplot_datablock(fmt::format("method{}", m), points);
      plot += fmt::format("{}$method{} using 1:2 with linespoints lw 2 title {}", m > 0 ? ", " : "", m,
                          gnuplot_text_literal(methods[m]));
    }
    script += plot + "\nunset output\n";
    try {
      run_gnuplot(dir, "efficiency.gnuplot", script, "efficiency.log", {"efficiency.png"});
    } catch (const GnuplotMissing& e) {
      std::fprintf(stderr, "sparsgd: warning: no plot (%s); wrote %s only\n", e.what(), (dir / "scaling.csv").c_str());
    }
  }
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Scaling efficiency of S-SGD with each aggregator, from the closed-form alpha-beta model");
  cmd->add_option("--model", o->model, "vgg16, resnet20, alexnet, resnet50, lstm-ptb or custom")->capture_default_str();
  cmd->add_option("--workers", o->workers, "worker counts, comma separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--network", o->network, "none is not allowed: 1gbe, 10gbe, paper-1gbe or alpha=S,bw=BITS")->capture_default_str();
  cmd->add_option("--density", o->density, "fraction of gradient entries sent")->capture_default_str();
  cmd->add_option("--params", o->params, "gradient length (overrides the preset)");
  cmd->add_option("--compute-ms", o->compute_ms, "compute time per iteration (overrides the preset)");
  cmd->add_option("--compress-ms", o->compress_ms, "compression time per iteration: milliseconds or 'measured'");
  cmd->add_option("--index-coding", o->index_coding,
                  "raw or compressed: the sparse methods' indices as the closed form charges them (compressed: "
                  "the code's expected size; its CPU time is not charged)")
      ->capture_default_str();
  cmd->add_option("--out", o->out_dir, "write scaling.csv and efficiency.png here")->check(non_empty_path());
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace sparsgd::cli
