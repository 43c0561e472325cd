#pragma once
// One worker's whole exchange step: error feedback, compression, aggregation, and the residual
// update from exactly what the aggregation consumed. What the trainer and the benchmarks call.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/compress/error_feedback.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

struct ExchangeConfig {
  compress::CompressorConfig compressor;
  std::string aggregator = "gtopk";
  double density = 0.001;
  // Off: no memory; what the aggregation did not consume is dropped (compress/error_feedback.hpp).
  // Unbiased compressors (value_scale != 1) need it off.
  bool error_feedback = true;
  // How sparse messages carry their indices (every rank the same); compressed needs an aggregator
  // that sends indices.
  wire::IndexCoding index_coding = wire::IndexCoding::raw;
  // auto: the network to choose for; unknown: measured by a ping-pong at the first exchange.
  NetworkEstimate network;
  // auto: trials of each plausible candidate before it settles (0 to 16; 0: the closed forms alone).
  int auto_trial_rounds = 2;
  // Benchmarks: a barrier between compression and aggregation, so that aggregate_seconds times the
  // collective alone (no worker waits there for a slower one's compression). Off in training.
  bool barrier_before_aggregation = false;
};

struct ExchangeTimes {
  double compress_seconds = 0.0;   // accumulate + select (wall clock)
  double aggregate_seconds = 0.0;  // the collective (wall clock; after the barrier, if configured)
  // The same span on the transport's clock (MPI_Wtime under MPI, so SimGrid SMPI's simulated time).
  double aggregate_clock_start = 0.0;
  double aggregate_clock_end = 0.0;
  double compress_cpu_seconds = 0.0;  // accumulate + select, thread CPU time
  double aggregate_cpu_seconds = 0.0;  // merges, encoding, validation inside the collective
  double feedback_cpu_seconds = 0.0;  // residual update after aggregation, thread CPU time
};

// Throws InvalidArgument, naming the option, for an unknown compressor or aggregator, a bad
// density or r-factor, or a combination that cannot work: randk-shared with a compressor that
// does not draw shared indices, an unbiased compressor with error feedback on, compressed indices
// with an aggregator that sends none.
void validate(const ExchangeConfig& config);

class GradientExchange {
 public:
  // Throws InvalidArgument where validate(config) does, or for an n that does not fit.
  GradientExchange(transport::Transport& transport, std::size_t n, const ExchangeConfig& config);

  // Collective. Returns the SUM over workers (sparse, or dense for the dense aggregator); valid
  // until the next call.
  const Aggregation& exchange(std::span<const float> gradient, std::uint64_t iteration);

  std::size_t n() const { return feedback_.size(); }
  std::size_t k() const { return k_; }
  // Changes the density from the next exchange on (density warm-up).
  void set_density(double density);
  const SparseVector& last_selection() const { return selection_; }
  const ExchangeTimes& last_times() const { return times_; }
  compress::ErrorFeedback& feedback() { return feedback_; }
  const compress::ErrorFeedback& feedback() const { return feedback_; }
  const compress::Compressor& compressor() const { return *compressor_; }
  const Aggregator& aggregator() const { return *aggregator_; }

 private:
  transport::Transport& transport_;
  std::unique_ptr<compress::Compressor> compressor_;
  std::unique_ptr<Aggregator> aggregator_;
  compress::ErrorFeedback feedback_;
  std::size_t k_;
  bool barrier_before_aggregation_;
  SparseVector selection_;
  Aggregation result_;
  ExchangeTimes times_;
};

}  // namespace sparsgd::collectives
