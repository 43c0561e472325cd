#pragma once
// The serial replay of aggregations of given selections: no compressor and no error feedback, only
// the reference aggregation (reference.hpp) of what every worker passed to aggregate(). `bench comm
// --selections drawn` verifies its runs against it where whole exchange steps (replay.hpp) would
// hold P gradients of n floats: its memory is the P selections and the reference.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/reference.hpp"

namespace sparsgd::collectives {

class SelectionReplay {
 public:
  // Throws InvalidArgument for an unknown aggregator.
  explicit SelectionReplay(std::string aggregator);

  // The reference of one aggregation of `selections` (worker w's at w) with per-worker target k.
  // `method`: the aggregator that formed the sum (Aggregation::method), needed where the configured
  // one delegates (auto); empty: the configured one.
  void step(const std::vector<SparseVector>& selections, std::size_t k, std::string_view method = {});

  const ReferenceAggregation& reference() const { return reference_; }
  // "" when `got` holds the last step's reference sum (reference_sum_difference); else what differs.
  std::string sum_difference(const Aggregation& got) const;
  // Conservation in the last step: || sum over workers of their consumed entries - aggregated || /
  // || aggregated ||, in double (the absolute norm where aggregated is zero).
  double conservation_error(const Aggregation& aggregated) const;

 private:
  std::string aggregator_;
  bool exact_order_ = true;
  int workers_ = 0;
  std::size_t n_ = 0;
  ReferenceAggregation reference_;
  // The consumed entries of the last step, summed per index in double, ascending by index.
  std::vector<std::pair<std::uint32_t, double>> consumed_sum_;
};

}  // namespace sparsgd::collectives
