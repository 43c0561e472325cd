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
  std::vector<std::vector<std::uint8_t>> consumed;  // [worker][entry]
};

// selections[w]: worker w's selection (ascending, same dim). Sums are taken in the same order as
// the distributed algorithms where the algorithm fixes one (tree, recursive doubling, rank order for
// allgather); the ring-based methods (dense, randk-shared) sum in rank order here and in ring order
// there, so compare those with a tolerance.
ReferenceAggregation reference_aggregate(const std::string& aggregator, const std::vector<SparseVector>& selections,
                                         std::size_t k);

}  // namespace sparsgd::collectives
