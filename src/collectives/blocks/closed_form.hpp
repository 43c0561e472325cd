#pragma once
// What the aggregators' closed forms (descriptor.hpp) share: the shapes of their schedules and the
// ring allreduce that dense and randk-shared both use.

#include <cstddef>

#include "sparsgd/collectives/descriptor.hpp"

namespace sparsgd::collectives::closed_form {

int ceil_log2(int p);
// The largest power of two not above p (recursive doubling's core group).
int power_of_two_floor(int p);

// The ring allreduce of `values` floats (algorithms.hpp): 2(P - 1) messages per rank, each one of
// the chunks ring_chunk cuts, with a dense header.
RankTraffic ring_traffic(std::size_t values, int workers, int rank);
// Its critical path: 2(P - 1) steps of the largest chunk.
CommCost ring_cost(std::size_t values, const CostQuery& query);

}  // namespace sparsgd::collectives::closed_form
