// `sparsgd bench comm`: the communication benchmark (benchmark/comm_benchmark.hpp) from the command
// line: its options, the launch (in-process workers, or one per MPI rank), and its report, as text
// or one JSON document.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/exchange_options.hpp"
#include "cli/memory_report.hpp"
#include "cli/mpi_job.hpp"
#include "cli/validators.hpp"
#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/sim/cost_model.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::cli {
namespace {

using benchmark::aggregation_ms;
using benchmark::max_per_iteration;
using benchmark::median;
using benchmark::median_clock_ms;
using benchmark::median_of_max;
using benchmark::sum_per_iteration;

// The benchmark's options and how the CLI prints its report.
struct CommOptions {
  benchmark::CommBenchmarkOptions run;
  bool json = false;
};

// One run's report: with --json its document (returned, for print_reports to print), otherwise
// printed as text here.
std::optional<nlohmann::json> report_run(const CommOptions& o, int workers, const transport::NetworkSpec& network,
                                         const benchmark::CommReport& r) {
  const std::size_t k = k_from_density(o.run.n, o.run.exchange.density);
  double max_bytes = 0.0, sum_bytes = 0.0, max_messages = 0.0;
  for (const auto& c : r.counters) {
    const double bytes = static_cast<double>(c.bytes_sent) / o.run.iters;
    max_bytes = std::max(max_bytes, bytes);
    sum_bytes += bytes;
    max_messages = std::max(max_messages, static_cast<double>(c.messages_sent) / o.run.iters);
  }
  const double mean_bytes = sum_bytes / static_cast<double>(workers);
  const double median_ms = benchmark::median_of_max(r.wall_ms);
  const std::vector<double> agg_ms = max_per_iteration(r.agg_ms);
  nlohmann::json sim_ms = nullptr, sim_comm_ms = nullptr, model_ms = nullptr, clock_ms = nullptr;
  const transport::NetworkSpec model = network.enabled() ? network : transport::parse_network(o.run.model_network);
  if (network.enabled()) {
    sim_ms = median_of_max(r.sim_ms);
    sim_comm_ms = median(aggregation_ms(r));
  }
  if (model.enabled()) {
    model_ms = 1e3 * sim::aggregation_cost(o.run.exchange.aggregator, workers, o.run.n, k, model, wire::parse_index_coding(o.run.exchange.index_coding))
                         .seconds;
  }
  if (r.global_clock) clock_ms = median_clock_ms(r);
  nlohmann::json auto_json = nullptr;
  if (r.auto_decision) {
    const collectives::AutoDecision& d = *r.auto_decision;
    nlohmann::json trials = nlohmann::json::array();
    for (const collectives::AutoTrial& trial : d.trials) {
      trials.push_back({{"aggregator", std::string(trial.aggregator)},
                        {"model_ms", 1e3 * trial.model_seconds},
                        {"measured_ms", trial.runs > 0 ? nlohmann::json(1e3 * trial.measured_seconds) : nlohmann::json()},
                        {"second_ms", trial.runs > 1 ? nlohmann::json(1e3 * trial.second_seconds) : nlohmann::json()},
                        {"runs", trial.runs}});
    }
    // The iterations after the first trials (bench comm has one (n, k), so they come first; any
    // re-trial among them counts: it is part of what auto costs).
    nlohmann::json settled_ms = nullptr;
    if (network.enabled() && (!d.settled.empty() || d.retrials > 0)) {
      const std::vector<double> spans = aggregation_ms(r);
      const auto first = static_cast<std::size_t>(d.first_settled_after);
      if (first < spans.size()) settled_ms = median(std::vector<double>(spans.begin() + static_cast<std::ptrdiff_t>(first), spans.end()));
    }
    auto_json = {{"choice", std::string(d.settled.empty() ? d.last_choice : d.settled)},
                 {"settled", !d.settled.empty()},
                 {"model_choice", std::string(d.model_choice)},
                 {"trials", trials},
                 {"tie_tolerance", collectives::kTrialTieTolerance},
                 {"tie_unless_beaten_twice", true},
                 {"timed_rounds", d.timed_rounds},
                 {"trial_exchanges", d.trial_exchanges},
                 {"timed_exchanges", d.timed_exchanges},
                 {"retrials", d.retrials},
                 {"first_settled_after", d.first_settled_after},
                 {"sim_comm_settled_ms", settled_ms},
                 {"alpha_s", d.network.alpha_seconds},
                 {"seconds_per_byte", d.network.seconds_per_byte},
                 {"network_measured", d.network.measured}};
  }
  if (o.json) {
    nlohmann::json doc = {{"sparsgd", build_identity()},
                          {"transport", o.run.transport},
                          {"workers", workers},
                          {"n", o.run.n},
                          {"k", k},
                          {"density", o.run.exchange.density},
                          {"selections", o.run.selections},
                          {"compressor", o.run.drawn() ? nlohmann::json() : nlohmann::json(o.run.exchange.compressor)},
                          {"error_feedback", o.run.drawn() ? nlohmann::json() : nlohmann::json(o.run.exchange.error_feedback)},
                          {"aggregator", o.run.exchange.aggregator},
                          {"auto", auto_json},
                          {"index_coding", o.run.exchange.index_coding},
                          {"network", network.name},
                          {"model_network", model.name},
                          {"iters", o.run.iters},
                          {"median_ms", median_ms},
                          {"agg_median_ms", median(agg_ms)},
                          {"agg_ms", agg_ms},
                          {"sim_comm_ms_per_iteration", network.enabled() ? nlohmann::json(aggregation_ms(r)) : nlohmann::json()},
                          {"agg_cpu_median_ms", median_of_max(r.agg_cpu_ms)},
                          {"agg_cpu_ms_per_iteration",
                           {{"max", max_per_iteration(r.agg_cpu_ms)}, {"sum", sum_per_iteration(r.agg_cpu_ms)}}},
                          {"agg_minor_faults_per_iteration",
                           o.run.drawn() ? nlohmann::json(sum_per_iteration(r.agg_minor_faults)) : nlohmann::json()},
                          {"compress_median_ms", median_of_max(r.compress_ms)},
                          {"sim_ms", sim_ms},
                          {"sim_comm_ms", sim_comm_ms},
                          {"clock_ms", clock_ms},
                          {"model_comm_ms", model_ms},
                          {"bytes_sent_per_worker", {{"max", max_bytes}, {"mean", mean_bytes}}},
                          {"messages_per_worker", {{"max", max_messages}}},
                          {"conservation_rel_error", o.run.verify ? nlohmann::json(r.conservation_rel_error) : nlohmann::json()},
                          {"matches_reference", o.run.verify ? nlohmann::json(r.matches) : nlohmann::json()},
                          {"memory", memory_json(r.memory)},
                          // --interleave: the other aggregator's document, from the same process.
                          {"interleave", nullptr}};
    return doc;
  }
  fmt::print("comm: transport={} workers={} n={} k={} {} aggregator={} indices={} network={} iters={}\n", o.run.transport,
             workers, o.run.n, k, o.run.drawn() ? "selections=drawn" : "compressor=" + o.run.exchange.compressor, o.run.exchange.aggregator,
             o.run.exchange.index_coding, network.name, o.run.iters);
  if (r.auto_decision) {
    const collectives::AutoDecision& d = *r.auto_decision;
    fmt::print("  auto: network alpha {:.3g} s, {:.3g} s/byte ({}); closed forms propose {}\n", d.network.alpha_seconds,
               d.network.seconds_per_byte, d.network.measured ? "measured by ping-pong" : "given by --network",
               d.model_choice);
    for (const collectives::AutoTrial& trial : d.trials) {
      fmt::print("    {:<10} model {:.3f} ms, fastest trial {}\n", trial.aggregator, 1e3 * trial.model_seconds,
                 trial.runs > 1   ? fmt::format("{:.3f} ms ({} runs, second {:.3f})", 1e3 * trial.measured_seconds,
                                                               trial.runs, 1e3 * trial.second_seconds)
                 : trial.runs > 0 ? fmt::format("{:.3f} ms ({} run)", 1e3 * trial.measured_seconds, trial.runs)
                                : std::string("not run"));
    }
    if (d.settled.empty()) {
      fmt::print("    {} after {} trial exchanges (more --iters to settle)\n",
                 d.retrials > 0 ? "trying again" : "still trying", d.trial_exchanges);
    } else {
      fmt::print("    settled on {} after {} trial exchanges ({} warm-ups, untimed)\n", d.settled, d.trial_exchanges,
                 d.trial_exchanges - d.timed_exchanges);
    }
    if (d.retrials > 0) {
      fmt::print("    trials run again {} time(s): after {} settled exchanges, then twice as many each time\n",
                 d.retrials, collectives::kAutoRetrialFirst);
    }
  }
  fmt::print("  wall per iteration (median of slowest worker): {:.3f} ms\n", median_ms);
  fmt::print("  of which aggregation alone (after a barrier): {:.3f} ms wall, {:.3f} ms CPU; compression {:.3f} ms\n",
             median(agg_ms), median_of_max(r.agg_cpu_ms), median_of_max(r.compress_ms));
  if (network.enabled()) {
    fmt::print("  simulated iteration: {:.3f} ms, of which aggregation {:.3f} ms\n", sim_ms.get<double>(),
               sim_comm_ms.get<double>());
  }
  if (r.global_clock) fmt::print("  aggregation on the transport's clock (median): {:.3f} ms\n", clock_ms.get<double>());
  if (model.enabled()) fmt::print("  closed-form aggregation on {}: {:.3f} ms\n", model.name, model_ms.get<double>());
  fmt::print("  bytes sent per worker per iteration: max {:.0f}, mean {:.0f}; messages max {:.1f}\n", max_bytes,
             mean_bytes, max_messages);
  if (o.run.verify) {
    fmt::print("  matches reference: {}; conservation relative error: {:.3g}\n", r.matches ? "yes" : "NO",
               r.conservation_rel_error);
  }
  return std::nullopt;
}

// Prints the runs' reports, --aggregator's first: with --json one document, the interleaved run's
// under "interleave"; then fails if any run did not verify.
void print_reports(const std::vector<std::pair<const CommOptions*, const benchmark::CommReport*>>& runs, int workers,
                   const transport::NetworkSpec& network) {
  std::optional<nlohmann::json> doc;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [options, report] = runs[i];
    if (i > 0 && !options->json) {
      fmt::print("interleaved with the run above in the same process, exchange by exchange:\n");
    }
    std::optional<nlohmann::json> run_doc = report_run(*options, workers, network, *report);
    if (!run_doc) continue;
    if (doc) {
      (*doc)["interleave"] = std::move(*run_doc);
    } else {
      doc = std::move(run_doc);
    }
  }
  if (doc) std::printf("%s\n", doc->dump().c_str());
  for (const auto& [options, report] : runs) benchmark::check_verified(options->run, *report);
}

void check_memory(const MemoryEstimate& estimate) {
  require_memory("bench comm", estimate,
                 "lower --n, --workers or --density, or pass --no-verify (the verification replays every worker)");
}

// Everything that must be the same on every rank (not --workers: one per rank).
collectives::ConfigFields comm_config_fields(const CommOptions& o) {
  const benchmark::CommBenchmarkOptions& r = o.run;
  collectives::ConfigFields fields = {{"--n", std::to_string(r.n)}, {"--model-network", r.model_network}};
  for (auto& field : collectives::exchange_option_fields(r.exchange)) fields.push_back(std::move(field));
  const auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
  fields.insert(fields.end(), {{"--iters", std::to_string(r.iters)},
                               {"--seed", std::to_string(r.seed)},
                               {"--timeout-ms", std::to_string(r.timeout_ms)},
                               {"--verify", on_off(r.verify)},
                               {"--json", on_off(o.json)},
                               {"--ring-allreduce", on_off(r.ring_allreduce)},
                               {"--selections", r.selections},
                               {"--interleave", r.interleave}});
  return fields;
}

// transport_given / workers_given: whether the user named them.
// compressor_given: whether the user named an option of the compression (which drawn selections skip).
void run_bench_comm(CommOptions o, bool transport_given, bool workers_given, bool compressor_given) {
  SPARSGD_ENFORCE(!(o.run.drawn() && compressor_given),
                  "--selections drawn draws every worker's k entries itself: --compressor, --r-factor, "
                  "--threshold-period and --error-feedback do not apply to it");
  const MpiLaunch launch = detect_mpi_launch();
  if (launch.launched && !transport_given) o.run.transport = "mpi";  // under mpirun: one worker per rank
  SPARSGD_ENFORCE(!(launch.launched && o.run.transport == "local" && launch.size > 1),
                  "--transport local under a launch of " << launch.size << " ranks (" << launch.variable
                      << " is set) would run the whole benchmark in every rank: use --transport mpi, or start it "
                         "without mpirun");
  benchmark::validate(o.run);
  const transport::NetworkSpec network = transport::parse_network(o.run.exchange.network);
  if (o.run.transport == "local") {
    const MemoryEstimate memory = benchmark::memory_estimate(o.run, o.run.workers, o.run.workers, true);
    check_memory(memory);
    const std::vector<benchmark::CommReport> reports = benchmark::run_local(o.run, memory);
    std::vector<CommOptions> options = {o};
    if (!o.run.interleave.empty()) options.push_back({benchmark::interleaved_options(o.run), o.json});
    std::vector<std::pair<const CommOptions*, const benchmark::CommReport*>> runs;
    for (std::size_t i = 0; i < reports.size(); ++i) runs.emplace_back(&options[i], &reports[i]);
    print_reports(runs, o.run.workers, network);
    return;
  }
  run_mpi_job(std::chrono::milliseconds(o.run.timeout_ms), "bench comm",
              workers_given ? std::optional<int>(o.run.workers) : std::nullopt, [&](transport::Transport& t) {
                collectives::check_ranks_agree(t, comm_config_fields(o), "the bench comm options");
                const int here = static_cast<int>(std::min<long>(detect_mpi_launch().local_size, t.size()));
                const MemoryEstimate memory = benchmark::memory_estimate(o.run, t.size(), here, t.rank() == 0);
                check_memory(memory);
                const std::optional<benchmark::CommReport> report = benchmark::run_rank(t, o.run, memory);
                if (report) print_reports({{&o, &*report}}, t.size(), network);
              });
}

}  // namespace

void register_bench_comm(CLI::App& bench) {
  auto opt = std::make_shared<CommOptions>();
  benchmark::CommBenchmarkOptions& run = opt->run;
  CLI::App* cmd = bench.add_subcommand("comm", "Compression + aggregation + error feedback on P workers, verified");
  cmd->add_option("--transport", run.transport, "local (threads in this process) or mpi (under mpirun)")->capture_default_str();
  cmd->add_option("--workers", run.workers, "workers for the local transport")->capture_default_str();
  cmd->add_option("--n", run.n, "gradient length")->capture_default_str()->check(non_negative_integer());
  add_exchange_options(cmd, run.exchange);
  cmd->add_option("--model-network", run.model_network,
                  "report the closed-form aggregation cost on this network (as --network) next to a measurement "
                  "that is not simulated here (a real network, or SimGrid SMPI's)")
      ->capture_default_str();
  cmd->add_option("--iters", run.iters, "iterations")->capture_default_str();
  cmd->add_option("--seed", run.seed, "seed of the synthetic gradients and random compressors")->capture_default_str()->check(non_negative_integer());
  cmd->add_option("--timeout-ms", run.timeout_ms, "longest wait for a peer before failing")->capture_default_str();
  cmd->add_flag("!--no-verify", run.verify, "skip the serial reference check");
  cmd->add_flag("--json", opt->json, "print one JSON object");
  cmd->add_flag("--ring-allreduce", run.ring_allreduce,
                "dense: the library's ring over point-to-point messages even where the transport has its own "
                "allreduce (MPI); with --network it always is");
  cmd->add_option("--selections", run.selections,
                  "gradient: each worker compresses its synthetic gradient with error feedback; drawn: each draws k "
                  "uniformly random entries and only the aggregation runs (memory O(P k), not O(P n))")
      ->capture_default_str();
  cmd->add_option("--interleave", run.interleave,
                  "another aggregator, run on the same workers in the same process with its own compressor and "
                  "residual, its exchanges alternating with --aggregator's (which goes first alternates too), so "
                  "that two aggregators are compared under the same conditions; --json gives its report under "
                  "\"interleave\" (--transport local)");
  cmd->callback([opt, cmd] {
    const bool compressor_given = cmd->count("--compressor") + cmd->count("--r-factor") +
                                      cmd->count("--threshold-period") + cmd->count("--error-feedback") > 0;
    run_bench_comm(*opt, cmd->count("--transport") > 0, cmd->count("--workers") > 0, compressor_given);
  });
}

}  // namespace sparsgd::cli
