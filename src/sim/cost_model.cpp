#include "sparsgd/sim/cost_model.hpp"

#include "sparsgd/core/error.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::sim {

CommCost aggregation_cost(const std::string& aggregator, int workers, std::size_t n, std::size_t k,
                          const transport::NetworkSpec& network, wire::IndexCoding coding) {
  SPARSGD_ENFORCE(workers >= 1, "workers must be at least 1");
  SPARSGD_ENFORCE(network.enabled(), "the cost model needs a network with a bandwidth");
  const collectives::AggregatorDescriptor& descriptor = collectives::find_aggregator(aggregator);
  SPARSGD_ENFORCE(coding == wire::IndexCoding::raw || descriptor.properties.sends_indices,
                  "cost model: the " << aggregator << " aggregator sends no indices to compress");
  collectives::CostQuery query;
  query.workers = workers;
  query.n = n;
  query.k = k;
  query.coding = coding;
  query.alpha_seconds = network.alpha_seconds;
  query.seconds_per_byte = 1.0 / network.bytes_per_second;
  return descriptor.cost(query);
}

}  // namespace sparsgd::sim
