#pragma once
// A serial model of every aggregator's semantics, written as plainly as possible (ordered maps,
// full sorts, explicit lists of which worker's entry each pair holds) so that the distributed
// implementations can be checked against it. Not for production use: it is slow on purpose.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::collectives {

struct ReferenceAggregation {
  bool dense = false;
  SparseVector sum;
  std::vector<float> dense_sum;
  // Sum of the absolute values of the terms of each entry of the sum (dense: of each index): the
  // scale of the rounding error of a float sum taken in another order.
  std::vector<double> magnitude;
  std::vector<std::vector<std::uint8_t>> consumed;  // [worker][entry]
};

// selections[w]: worker w's selection (ascending, same dim). Sums are taken in the same order as
// the distributed algorithms where the algorithm fixes one (tree, recursive doubling, rank order for
// allgather); the ring-based methods (dense, randk-shared) sum in rank order here and in ring order
// there, so compare those with a tolerance.
ReferenceAggregation reference_aggregate(const std::string& aggregator, const std::vector<SparseVector>& selections,
                                         std::size_t k);

// The reference's sum as the average over `workers` that the torch layer returns: n floats, the
// sum divided by the worker count once, 0 where no selection carried an entry.
std::vector<float> reference_average(const ReferenceAggregation& aggregation, std::size_t n, int workers);

// Whether two float sums of the same `terms` terms, taken in different orders, agree within the
// worst-case rounding bound 2 * gamma(terms - 1) * magnitude (Higham), where gamma(m) = m u / (1 - m u).
bool sums_agree(float a, float b, double magnitude, int terms);

}  // namespace sparsgd::collectives
