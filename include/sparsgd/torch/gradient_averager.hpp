#pragma once
// The averaging core of every torch-layer front end (the gradient synchronizer, the momentum SGD,
// the Python DDP hook's buckets): a flat buffer of n floats, split into one exchange or one per
// segment, goes through error feedback, compression and aggregation, and the AVERAGE over the
// workers (the sum divided by P, once) comes back. Residual accounting is exact, as in
// collectives::GradientExchange, which does the work.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

struct StepStats {
  double compress_cpu_seconds = 0.0;
  double aggregate_wall_seconds = 0.0;
  double aggregate_cpu_seconds = 0.0;
  double feedback_cpu_seconds = 0.0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_sent = 0;
  std::size_t selected = 0;  // entries this worker selected
  bool skipped = false;       // skip_nonfinite: some worker's gradient was not finite
  std::string skip_reason;    // what this worker saw, or which rank flagged the step
};

// [begin, end) ranges of a flat buffer.
using Segments = std::vector<std::pair<std::size_t, std::size_t>>;

// Throws InvalidArgument unless momentum is in [0, 1) (0: no momentum correction); returns it.
double checked_momentum_correction(double momentum);
// The ranges a buffer's exchanges cover: all of it, or one per non-empty segment (per_segment).
// Throws InvalidArgument unless the segments tile [0, n) in order with n > 0.
Segments exchange_ranges(const Segments& segments, bool per_segment);
// The configuration the exchanges are built with: auto's network measured once, here, if unknown.
collectives::ExchangeConfig resolved_exchange(transport::Transport& transport,
                                              const collectives::ExchangeConfig& exchange);

// The error for a NaN or Inf at `index` of a flat buffer: the parameter (segment) it falls in by
// name, the element within it, the iteration and the rank.
std::string nonfinite_gradient_message(float value, std::size_t index, const Segments& segments,
                                       const std::vector<std::string>& names, std::uint64_t iteration, int rank);

// What check_finite does once this rank's finding is known (`nonfinite`: its message, or empty):
// throws it, or with skip_nonfinite agrees with the other ranks whether to skip the step.
StepStats nonfinite_outcome(transport::Transport& transport, bool skip_nonfinite, const std::string& nonfinite,
                            std::uint64_t iteration);

class GradientAverager {
 public:
  // `segments` cover [0, n) in order (one per parameter) and `names` label them in error messages.
  // per_segment: one exchange per segment (k per segment) instead of one over all n.
  // momentum_correction > 0 (DGC's momentum correction, the momentum factor): each worker keeps
  // its own velocity u = m u + input, error feedback works on u instead of the input, and what a
  // worker sent and the aggregation consumed also leaves its velocity (momentum factor masking);
  // the average is then to be applied WITHOUT further momentum.
  // Throws InvalidArgument for an empty buffer, segments that do not tile it, a momentum outside
  // [0, 1), or a bad exchange configuration (see GradientExchange).
  GradientAverager(transport::Transport& transport, Segments segments, std::vector<std::string> names,
                   const collectives::ExchangeConfig& exchange, bool per_segment, bool skip_nonfinite,
                   double momentum_correction = 0.0);

  // Before anything is sent: if `gradient` holds NaN or Inf, throws InvalidData naming the
  // segment, element, iteration and rank ("nothing was sent"); with skip_nonfinite instead all
  // workers agree (2 ceil(log2 P) small messages) and every one returns skipped stats if any
  // worker found one. Returns non-skipped (empty) stats otherwise.
  StepStats check_finite(std::span<const float> gradient, std::uint64_t iteration);

  // Collective. Exchanges `input` (n floats, with error feedback; with momentum correction, the
  // velocity it updates) and writes the average over the workers into `average` (n floats, not
  // overlapping `input`; entries that nobody's selection carried are 0).
  StepStats average(std::span<const float> input, std::span<float> average, std::uint64_t iteration);

  std::size_t size() const { return n_; }
  const Segments& segments() const { return segments_; }
  void set_density(double density);
  double density() const { return density_; }

  // One exchange, or one per segment, and the ranges they cover.
  std::size_t exchange_count() const { return exchanges_.size(); }
  const std::pair<std::size_t, std::size_t>& exchange_range(std::size_t e) const { return exchange_ranges_[e]; }
  const collectives::GradientExchange& exchange(std::size_t e) const { return *exchanges_[e]; }
  // What exchange e returned in the last average() (valid until the next).
  const collectives::Aggregation& last_result(std::size_t e) const { return *last_results_[e]; }

  double momentum_correction() const { return momentum_; }
  // This worker's velocity (n floats; empty without momentum correction), for checkpoints.
  const std::vector<float>& local_velocity() const { return velocity_; }
  // Throws InvalidArgument unless it has n floats (none without momentum correction).
  void set_local_velocity(const std::vector<float>& velocity);

  // One residual per exchange, for checkpoints.
  std::vector<std::vector<float>> residuals() const;
  void set_residuals(const std::vector<std::vector<float>>& residuals);

 private:
  std::string find_nonfinite(std::span<const float> gradient, std::uint64_t iteration) const;

  transport::Transport& transport_;
  Segments segments_;
  std::vector<std::string> names_;
  bool skip_nonfinite_;
  std::size_t n_ = 0;
  double density_;
  double momentum_;
  std::vector<float> velocity_;
  Segments exchange_ranges_;
  std::vector<std::unique_ptr<collectives::GradientExchange>> exchanges_;
  std::vector<const collectives::Aggregation*> last_results_;
};

}  // namespace sparsgd::torch_layer
