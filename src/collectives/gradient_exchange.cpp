#include "sparsgd/collectives/gradient_exchange.hpp"

#include <chrono>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::collectives {

void validate(const ExchangeConfig& config) {
  const auto compressor = compress::make_compressor(config.compressor);
  make_aggregator(config.aggregator, {config.index_coding});
  validate_density(config.density);
  SPARSGD_ENFORCE(config.auto_trial_rounds >= 0 && config.auto_trial_rounds <= kMaxAutoTrialRounds,
                  "auto's trial rounds must be 0 to " << kMaxAutoTrialRounds << ", not " << config.auto_trial_rounds);
  const auto draws = [](const compress::CompressorDescriptor& d) { return d.properties.draws_indices; };
  SPARSGD_ENFORCE(!find_aggregator(config.aggregator).properties.needs_shared_indices ||
                      draws(compress::find_compressor(config.compressor.name)),
                  "the " << config.aggregator << " aggregator needs the " << compress::compressor_choices(draws)
                         << " compressor (its workers must select the same indices), not " << config.compressor.name);
  // The dense compressor selects all n entries, which a sparse aggregator takes only as its k.
  SPARSGD_ENFORCE(!compressor->dense() || find_aggregator(config.aggregator).properties.dense_result || config.density == 1.0,
                  "the " << config.compressor.name << " compressor sends all n entries: use the dense aggregator, "
                         << "or density 1 (not " << config.density << ") with the " << config.aggregator
                         << " aggregator");
  SPARSGD_ENFORCE(!config.error_feedback || !compressor->scales_values(),
                  "the " << config.compressor.name
                         << " compressor scales the values it sends, which error feedback cannot account for: "
                            "switch error feedback off");
}

namespace {
// The whole configuration is checked before any member is built from a part of it.
std::unique_ptr<compress::Compressor> make_validated_compressor(const ExchangeConfig& config) {
  validate(config);
  return compress::make_compressor(config.compressor);
}
}  // namespace

GradientExchange::GradientExchange(transport::Transport& transport, std::size_t n, const ExchangeConfig& config)
    : transport_(transport),
      compressor_(make_validated_compressor(config)),
      aggregator_(make_aggregator(config.aggregator, {config.index_coding, config.network, config.auto_trial_rounds})),
      feedback_(n, config.error_feedback),
      k_(k_from_density(n, config.density)),
      barrier_before_aggregation_(config.barrier_before_aggregation) {}

void GradientExchange::set_density(double density) { k_ = k_from_density(n(), density); }

const Aggregation& GradientExchange::exchange(std::span<const float> gradient, std::uint64_t iteration) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const double cpu_start = transport::thread_cpu_seconds();
  const std::span<const float> acc = feedback_.accumulate(gradient);
  try {
    compressor_->compress(acc, k_, {iteration, transport_.rank()}, selection_);
    const auto selected = clock::now();
    const double cpu_selected = transport::thread_cpu_seconds();
    times_.compress_cpu_seconds = cpu_selected - cpu_start;
    auto aggregate_start = selected;
    double cpu_aggregate_start = cpu_selected;
    if (barrier_before_aggregation_) {
      // Twice: the first absorbs the wait for the slowest compression, after which a transport
      // that polls may be polling slowly; the second then ends on every worker within a short
      // poll interval of the others.
      transport_.barrier();
      transport_.barrier();
      aggregate_start = clock::now();
      cpu_aggregate_start = transport::thread_cpu_seconds();
    }
    times_.aggregate_clock_start = transport_.clock_seconds();
    aggregator_->aggregate(transport_, selection_, k_, result_);
    times_.aggregate_clock_end = transport_.clock_seconds();
    const auto done = clock::now();
    const double cpu_commit = transport::thread_cpu_seconds();
    times_.aggregate_cpu_seconds = cpu_commit - cpu_aggregate_start;
    feedback_.commit(selection_, result_.consumed);
    times_.feedback_cpu_seconds = transport::thread_cpu_seconds() - cpu_commit;
    times_.compress_seconds = std::chrono::duration<double>(selected - start).count();
    times_.aggregate_seconds = std::chrono::duration<double>(done - aggregate_start).count();
  } catch (...) {
    // Nothing was consumed: the gradient stays in the residual, so no information is lost.
    if (feedback_.pending()) feedback_.commit(SparseVector{feedback_.size(), {}, {}});
    throw;
  }
  return result_;
}

}  // namespace sparsgd::collectives
