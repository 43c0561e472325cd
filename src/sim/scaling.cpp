#include "sparsgd/sim/scaling.hpp"

#include <cmath>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/sim/cost_model.hpp"

namespace sparsgd::sim {

const std::vector<ModelPreset>& model_presets() {
  // Parameter counts, times and efficiencies as listed in docs/DESIGN.md ("Reference figures"), from the
  // gTop-k authors' public code and scripts. Their PTB LSTM's compute time is not published there.
  static const std::vector<ModelPreset> presets = {
      {"vgg16", 15e6, 139.5, 91.4, 0.010, 0.048, 0.094},
      {"resnet20", 0.27e6, 146.0, 1.6, 0.313, 0.756, 0.857},
      {"alexnet", 61e6, 257.2, 383.8, 0.007, 0.053, 0.091},
      {"resnet50", 25.6e6, 4882.0, 154.0, 0.203, 0.578, 0.740},
      {"lstm-ptb", 66e6, std::nullopt, std::nullopt, 0.005, 0.014, 0.028},
  };
  return presets;
}

const ModelPreset& find_preset(const std::string& name) {
  for (const auto& p : model_presets()) {
    if (p.name == name) return p;
  }
  throw InvalidArgument("unknown model preset '" + name + "' (expected vgg16, resnet20, alexnet, resnet50 or lstm-ptb)");
}

std::vector<ScalingRow> scaling_table(double parameters, double compute_ms, double compress_ms, double density,
                                      const std::vector<int>& workers, const transport::NetworkSpec& network,
                                      wire::IndexCoding coding) {
  SPARSGD_ENFORCE(std::isfinite(parameters) && parameters >= 1 && parameters <= 4294967295.0,
                  "the parameter count must be in [1, 2^32), got " << parameters);
  SPARSGD_ENFORCE(std::isfinite(compute_ms) && compute_ms > 0, "compute time must be > 0 ms, got " << compute_ms);
  SPARSGD_ENFORCE(std::isfinite(compress_ms) && compress_ms >= 0, "compression time must be >= 0 ms, got " << compress_ms);
  SPARSGD_ENFORCE(!workers.empty(), "no worker counts given");
  const auto n = static_cast<std::size_t>(parameters);
  const std::size_t k = k_from_density(n, density);
  std::vector<ScalingRow> rows;
  for (const collectives::AggregatorDescriptor* d : collectives::modelled_aggregators()) {
    const std::string aggregator(d->name);
    for (const int p : workers) {
      SPARSGD_ENFORCE(p >= 1 && p <= 1 << 20, "worker counts must be in [1, 2^20], got " << p);
      ScalingRow row;
      row.method = aggregator;
      row.workers = p;
      row.compute_ms = compute_ms;
      row.compress_ms = d->properties.dense_result || p == 1 ? 0.0 : compress_ms;
      const auto indices = d->properties.sends_indices ? coding : wire::IndexCoding::raw;
      row.comm_ms = 1e3 * aggregation_cost(aggregator, p, n, k, network, indices).seconds;
      row.iteration_ms = row.compute_ms + row.compress_ms + row.comm_ms;
      row.efficiency = compute_ms / row.iteration_ms;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace sparsgd::sim
