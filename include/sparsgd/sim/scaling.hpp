#pragma once
// Scaling efficiency of S-SGD methods from the closed-form alpha-beta model, with the published
// per-iteration compute and compression times of the gTop-k paper's networks as presets.
//   iteration(P) = compute + compression + aggregation(P);  iteration(1) = compute
//   efficiency(P) = throughput of P workers / (P * throughput of one) = iteration(1) / iteration(P)
// (weak scaling: every worker processes the same batch).

#include <optional>
#include <string>
#include <vector>

#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::sim {

struct ModelPreset {
  std::string name;
  double parameters = 0;                     // gradient length n
  std::optional<double> compute_ms;          // per iteration, as published (gTop-k paper, 32 workers)
  std::optional<double> compress_ms;         // their gTop-k compression time per iteration
  // Their per-worker throughput scaling efficiency at 32 workers on 1 Gbps: dense, Top-k, gTop-k.
  double paper_dense = 0, paper_topk = 0, paper_gtopk = 0;
};

const std::vector<ModelPreset>& model_presets();
// Throws InvalidArgument naming the known presets.
const ModelPreset& find_preset(const std::string& name);

struct ScalingRow {
  std::string method;      // the aggregator (collectives::modelled_aggregators(): allgather is Top-k S-SGD)
  int workers = 1;
  double compute_ms = 0;
  double compress_ms = 0;  // 0 for dense
  double comm_ms = 0;
  double iteration_ms = 0;
  double efficiency = 0;   // in [0, 1]
};

// Rows for every modelled aggregator and every P in `workers`; the sparse methods' messages carry
// their indices in `coding` (dense has none). Throws InvalidArgument on a bad density, non-positive
// sizes or times, or a network without bandwidth.
std::vector<ScalingRow> scaling_table(double parameters, double compute_ms, double compress_ms, double density,
                                      const std::vector<int>& workers, const transport::NetworkSpec& network,
                                      wire::IndexCoding coding = wire::IndexCoding::raw);

}  // namespace sparsgd::sim
