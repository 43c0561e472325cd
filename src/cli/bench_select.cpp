// `sparsgd bench select`: every selection method, side by side on the same data in one run.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/memory_report.hpp"
#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "cli/validators.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/training/memory.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/topk.hpp"
#ifdef SPARSGD_HAVE_TORCH
#include "sparsgd/torch/topk_baseline.hpp"
#endif

namespace sparsgd::cli {
namespace {

struct SelectOptions {
  std::size_t n = 25'000'000;
  double density = 0.001;
  std::string dist = "normal";
  int repeat = 7;
  std::uint64_t seed = 1;
  bool json = false;
};

struct Method {
  Method(std::string name_, bool exact_, std::function<void()> run_, std::vector<std::uint32_t>* indices_ = nullptr,
         std::vector<float>* values_ = nullptr)
      : name(std::move(name_)), exact(exact_), run(std::move(run_)), indices(indices_), values(values_) {}
  std::string name;
  bool exact;                            // must select exactly the top-k set
  std::function<void()> run;             // one timed call
  std::vector<std::uint32_t>* indices;   // what it selected (after the last call)
  std::vector<float>* values;
  std::vector<double> times_ms;
};

// Plain baseline: nth_element on a copy of |x|, then a filter pass with the same tie rule.
void nth_element_select(std::span<const float> x, std::size_t k, std::vector<float>& scratch,
                        std::vector<std::uint32_t>& indices, std::vector<float>& values) {
  scratch.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) scratch[i] = std::fabs(x[i]);
  auto kth = scratch.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(scratch.begin(), kth, scratch.end(), std::greater<>());
  const float threshold = *kth;
  std::size_t greater = static_cast<std::size_t>(
      std::count_if(scratch.begin(), kth, [threshold](float v) { return v > threshold; }));
  std::size_t ties = k - greater;
  indices.clear();
  values.clear();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]);
    if (a > threshold || (a == threshold && ties > 0)) {
      if (a == threshold) --ties;
      indices.push_back(static_cast<std::uint32_t>(i));
      values.push_back(x[i]);
    }
  }
}

std::vector<float> sorted_magnitudes(const std::vector<float>& values) {
  std::vector<float> m(values.size());
  std::transform(values.begin(), values.end(), m.begin(), [](float v) { return std::fabs(v); });
  std::sort(m.begin(), m.end(), std::greater<>());
  return m;
}


void run_bench_select(const SelectOptions& opt) {
  SPARSGD_ENFORCE(opt.n >= 1, "--n must be at least 1");
  validate_length(opt.n);
  SPARSGD_ENFORCE(opt.repeat >= 1, "--repeat must be at least 1, got " << opt.repeat);
  const Distribution dist = parse_distribution(opt.dist);
  const std::size_t k = k_from_density(opt.n, opt.density);
  // The data, |x| copies for the nth_element and torch baselines, the radix fallback's keys, and
  // each method's output (k pairs; candidates and sorted copies for the checks), measured against
  // peak resident memory in tests/reliability.
  MemoryEstimate memory;
  memory.add("data, baselines' copies and scratch (8.5 arrays of n floats)", 8.5 * 4.0 * static_cast<double>(opt.n));
  memory.add("selections (10 x k pairs)", 10 * 8.0 * static_cast<double>(k));
  memory.add("threads and allocator", 32.0 * (1 << 20));
  const double resident_before = resident_bytes();
  require_memory("bench select", memory, "lower --n");

  std::vector<float> x(opt.n);
  fill_synthetic(x, dist, opt.seed);
  const std::span<const float> xs(x);

  std::vector<Method> methods;
  std::uint32_t sink = 0;
  methods.push_back({"read-pass", false, [&] { sink += select::max_magnitude_key(xs); }});

  select::TopkWorkspace topk_ws;
  SparseVector topk_out;
  select::TopkPath topk_path = select::TopkPath::empty;
  methods.push_back({"topk", true, [&] { topk_path = select::topk(xs, k, topk_out, topk_ws); },
                     &topk_out.indices, &topk_out.values});

  std::vector<float> nth_scratch, nth_values;
  std::vector<std::uint32_t> nth_indices;
  methods.push_back({"nth-element", true, [&] { nth_element_select(xs, k, nth_scratch, nth_indices, nth_values); },
                     &nth_indices, &nth_values});

#ifdef SPARSGD_HAVE_TORCH
  torch_layer::set_torch_threads(1);
  std::vector<std::uint32_t> torch_indices;
  std::vector<float> torch_values;
  methods.push_back({"torch-topk", true, [&] { torch_layer::torch_topk_abs(xs, k, torch_indices, torch_values); },
                     &torch_indices, &torch_values});
#endif

  // The other compressors (every registered one but the top-k above, the dense copy and those whose
  // selection repeats another's with scaled values), through the same interface the trainer uses.
  // Each call is the next iteration, so that a compressor that reuses its state across iterations
  // (topk-reuse) is timed as it runs in training.
  std::vector<std::unique_ptr<compress::Compressor>> compressors;
  std::vector<const compress::CompressorDescriptor*> timed;
  for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
    if (d->name != "topk" && !d->properties.dense && !d->properties.scales_values) timed.push_back(d);
  }
  std::vector<SparseVector> outputs(timed.size());
  auto calls = std::make_shared<std::vector<std::uint64_t>>(timed.size(), 0);
  for (std::size_t c = 0; c < timed.size(); ++c) {
    compress::CompressorConfig config;
    config.name = std::string(timed[c]->name);
    config.seed = opt.seed;
    compressors.push_back(compress::make_compressor(config));
    compress::Compressor* compressor = compressors.back().get();
    SparseVector* out = &outputs[c];
    methods.push_back({config.name, false,
                       [compressor, out, xs, k, calls, c] { compressor->compress(xs, k, {(*calls)[c]++, 0}, *out); },
                       &out->indices, &out->values});
  }

  // Interleave the methods in every round so that drift of a shared, noisy machine hits all alike.
  for (int r = 0; r < opt.repeat; ++r) {
    for (Method& m : methods) {
      const auto start = std::chrono::steady_clock::now();
      m.run();
      const auto stop = std::chrono::steady_clock::now();
      m.times_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
  }

  // Verification: the library's top-k and the nth_element baseline follow the same tie rule, so
  // their index sets must be identical; torch breaks ties its own way, so its selected magnitudes
  // must match as a multiset.
  bool verified = topk_out.size() == k && nth_indices == topk_out.indices && nth_values == topk_out.values;
  const std::vector<float> reference = sorted_magnitudes(topk_out.values);
  for (const Method& m : methods) {
    if (!m.exact || m.values == nullptr) continue;
    const bool same = sorted_magnitudes(*m.values) == reference;
    verified = verified && same;
  }

  const double floor_ms = benchmark::median(methods[0].times_ms);
  if (opt.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const Method& m : methods) {
      nlohmann::json entry = {{"name", m.name},
                              {"median_ms", benchmark::median(m.times_ms)},
                              {"min_ms", *std::min_element(m.times_ms.begin(), m.times_ms.end())},
                              {"max_ms", *std::max_element(m.times_ms.begin(), m.times_ms.end())}};
      if (m.indices != nullptr) entry["selected"] = m.indices->size();
      results.push_back(entry);
    }
    nlohmann::json doc = {{"sparsgd", build_identity()},
                                {"n", opt.n},           {"k", k},
                                {"density", opt.density}, {"dist", opt.dist},
                                {"repeat", opt.repeat},   {"topk_path", select::to_string(topk_path)},
                                {"results", results},     {"verified", verified},
                                {"memory", memory_json({memory.total(), resident_before, peak_resident_bytes()})}};
#ifdef SPARSGD_HAVE_TORCH
    doc["torch"] = torch_layer::torch_version();  // the torch of the torch-topk column
#endif
    std::printf("%s\n", doc.dump().c_str());
  } else {
    fmt::print("select: n={} k={} density={} dist={} repeat={} (one thread; times in ms)\n", opt.n, k,
               opt.density, opt.dist, opt.repeat);
    fmt::print("{:<12} {:>10} {:>10} {:>10} {:>12} {:>10}\n", "method", "median", "min", "max", "x read-pass",
               "selected");
    for (const Method& m : methods) {
      const double med = benchmark::median(m.times_ms);
      fmt::print("{:<12} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.2f} {:>10}\n", m.name, med,
                 *std::min_element(m.times_ms.begin(), m.times_ms.end()),
                 *std::max_element(m.times_ms.begin(), m.times_ms.end()), med / floor_ms,
                 m.indices ? std::to_string(m.indices->size()) : std::string("-"));
    }
    fmt::print("topk path: {}; exact methods agree: {}\n", select::to_string(topk_path), verified ? "yes" : "NO");
  }
  if (sink == 0xFFFFFFFFu) std::fprintf(stderr, " ");  // keeps the read pass from being optimized away
  if (!verified) throw Error("verification failed: the exact methods selected different sets");
}

}  // namespace

void register_bench_select(CLI::App& bench) {
  auto opt = std::make_shared<SelectOptions>();
  CLI::App* cmd = bench.add_subcommand("select", "Time every selection method side by side on the same data");
  cmd->add_option("--n", opt->n, "gradient length")->capture_default_str()->check(non_negative_integer());
  cmd->add_option("--density", opt->density, "fraction of entries kept, in (0, 1]")->capture_default_str();
  cmd->add_option("--dist", opt->dist, "data: normal, uniform, constant, sparse or heavy")->capture_default_str();
  cmd->add_option("--repeat", opt->repeat, "timed rounds (median, min and max are reported)")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "data and random-compressor seed")->capture_default_str()->check(non_negative_integer());
  cmd->add_flag("--json", opt->json, "print one JSON object instead of a table");
  cmd->callback([opt] { run_bench_select(*opt); });
}

}  // namespace sparsgd::cli
