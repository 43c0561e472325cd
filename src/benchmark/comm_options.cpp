// The benchmark's options: their checks, and the exchange they ask every worker to run.

#include <cstdio>

#include "sparsgd/benchmark/comm_benchmark.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::benchmark {

CommBenchmarkOptions interleaved_options(const CommBenchmarkOptions& o) {
  CommBenchmarkOptions partner = o;
  partner.exchange.aggregator = o.interleave;
  partner.interleave.clear();
  return partner;
}

collectives::ExchangeConfig exchange_config(const CommBenchmarkOptions& o) {
  collectives::ExchangeOptions exchange = o.exchange;
  // Drawn selections of an aggregator whose workers must share indices are what a compressor that
  // draws its indices selects with a shared seed (draw_selection shares them too): validated as that.
  if (o.drawn() && collectives::find_aggregator(o.exchange.aggregator).properties.needs_shared_indices) {
    for (const compress::CompressorDescriptor* d : compress::compressor_descriptors()) {
      if (d->properties.draws_indices && !d->properties.scales_values) {
        exchange.compressor = std::string(d->name);
        break;
      }
    }
  }
  collectives::ExchangeConfig config = collectives::make_exchange_config(exchange, o.seed);
  config.barrier_before_aggregation = true;  // so that the aggregation is timed alone
  return config;
}

void validate(const CommBenchmarkOptions& o) {
  SPARSGD_ENFORCE(o.n >= 1, "--n must be at least 1");
  validate_length(o.n);
  validate_density(o.exchange.density);
  SPARSGD_ENFORCE(o.iters >= 1, "--iters must be at least 1, got " << o.iters);
  SPARSGD_ENFORCE(o.timeout_ms >= 1, "--timeout-ms must be at least 1, got " << o.timeout_ms);
  exchange_config(o);
  if (o.model_network != "none") {
    SPARSGD_ENFORCE(o.exchange.network == "none",
                    "--model-network is for runs without --network (which reports the model itself)");
    SPARSGD_ENFORCE(transport::parse_network(o.model_network).enabled(), "--model-network needs a bandwidth");
  }
  SPARSGD_ENFORCE(o.selections == "gradient" || o.selections == "drawn",
                  "unknown --selections '" << o.selections << "' (expected gradient or drawn)");
  SPARSGD_ENFORCE(o.transport == "local" || o.transport == "mpi",
                  "unknown transport '" << o.transport << "' (expected local or mpi)");
  if (o.transport == "local") {
    SPARSGD_ENFORCE(o.workers >= 1 && o.workers <= 4096, "--workers must be in [1, 4096], got " << o.workers);
  }
  if (!o.interleave.empty()) {
    SPARSGD_ENFORCE(o.transport == "local", "--interleave runs both aggregators on the workers of one process: it needs "
                                            "--transport local, not " << o.transport);
    SPARSGD_ENFORCE(o.interleave != o.exchange.aggregator,
                    "--interleave " << o.interleave << " is --aggregator itself: name another aggregator");
    exchange_config(interleaved_options(o));
  }
}

void check_verified(const CommBenchmarkOptions& o, const CommReport& r) {
  if (!r.matches) throw Error("verification failed (" + o.exchange.aggregator + "): " + r.first_mismatch);
  if (o.verify && !(r.conservation_rel_error < 1e-5)) {
    char error[32];
    std::snprintf(error, sizeof error, "%.3g", r.conservation_rel_error);
    throw Error("conservation violated (" + o.exchange.aggregator + "): relative error " + error);
  }
}

}  // namespace sparsgd::benchmark
