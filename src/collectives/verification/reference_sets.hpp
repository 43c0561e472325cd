#pragma once
// The pieces the aggregators' serial references (reference.hpp) are written with: ordered maps of
// entries that remember which worker's entry each term was, so that the consumed flags follow.
// Plain and slow on purpose.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "sparsgd/collectives/reference.hpp"

namespace sparsgd::collectives::reference_sets {

struct Contribution {
  int worker;
  std::size_t entry;
};

struct Pair {
  float value = 0.0f;
  std::vector<Contribution> from;
};

using Set = std::map<std::uint32_t, Pair>;

// Every worker's selection as a set.
std::vector<Set> to_sets(const std::vector<SparseVector>& selections);

// own (+) incoming, own's value first, then the k largest |value| with ties by lower index.
Set merge_topk(const Set& own, const Set& incoming, std::size_t k);

// The aggregation whose sum is `final_set`, with every contribution to it consumed.
ReferenceAggregation from_final_set(const Set& final_set, const std::vector<SparseVector>& selections);

// Every entry of every selection summed in rank order, all consumed.
ReferenceAggregation sum_in_rank_order(const std::vector<SparseVector>& selections);

}  // namespace sparsgd::collectives::reference_sets
