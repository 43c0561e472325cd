#pragma once
// The serial replay of whole exchange steps on P workers: error feedback, each worker's
// compressor, the reference aggregation (reference.hpp) and the residual update, as
// GradientExchange must give them on every worker. `bench comm` verifies its runs against it, and
// the conformance tests every aggregator. Not for production use: it holds every worker's
// residual and runs the plain reference.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/compress/compressor.hpp"

namespace sparsgd::collectives {

// "" when `got` holds the reference's sum: bit for bit where `exact_order`, else within the rounding
// bound of a sum of `terms` terms taken in another order (sums_agree); else what differs first.
std::string reference_sum_difference(const ReferenceAggregation& want, const Aggregation& got, bool exact_order,
                                     int terms);

class ExchangeReplay {
 public:
  // Throws InvalidArgument where validate(config) does.
  ExchangeReplay(const ExchangeConfig& config, std::size_t n, int workers);

  std::size_t n() const { return n_; }
  int workers() const { return static_cast<int>(residual_.size()); }
  std::size_t k() const { return k_; }
  // Whether the last step's aggregator fixes the order of its additions, so that sums must match
  // bit for bit (the rings add in another order than the reference: there the rounding bound applies).
  bool exact_order() const { return exact_order_; }

  // One exchange step of every worker; gradient(w, out) writes worker w's gradient (n floats).
  // `method`: the aggregator that formed the step's sum (Aggregation::method), which must be given
  // where the configured one delegates (auto); empty: the configured one.
  void step(std::uint64_t iteration, const std::function<void(int, std::span<float>)>& gradient,
            std::string_view method = {});

  // Of the last step: worker w's selection, the reference aggregation, and w's residual after it.
  const SparseVector& selection(int worker) const { return selections_.at(static_cast<std::size_t>(worker)); }
  const ReferenceAggregation& reference() const { return reference_; }
  std::span<const float> residual(int worker) const { return residual_.at(static_cast<std::size_t>(worker)); }

  // "" when `got` holds the reference's sum (bit for bit where the order is fixed, within the
  // rounding bound otherwise); else what differs first.
  std::string sum_difference(const Aggregation& got) const;
  // Conservation of gradient mass in the last step: || scale * sum_w (acc_w - residual_w) -
  // aggregated || / || aggregated ||, in double (the absolute norm where aggregated is zero); scale
  // is the compressor's value scale (n/k for randk-unbiased, else 1).
  double conservation_error(const Aggregation& aggregated) const;

 private:
  std::size_t n_, k_;
  bool error_feedback_, exact_order_;
  std::string aggregator_;
  double scale_;
  std::vector<std::unique_ptr<compress::Compressor>> compressors_;
  std::vector<std::vector<float>> residual_;
  std::vector<SparseVector> selections_;
  ReferenceAggregation reference_;
  std::vector<float> gradient_;
  // sum_w (acc_w - residual_w) of the last step, at the indices it touched (the rest is zero).
  std::vector<double> consumed_sum_;
  std::vector<std::uint32_t> touched_;
};

}  // namespace sparsgd::collectives
