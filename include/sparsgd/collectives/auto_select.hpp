#pragma once
// `auto`: for each exchange, the aggregator the cost model (each descriptor's closed form) finds
// cheapest on the network in use, among dense, allgather, gtopk-rd and oktopk; a dense allreduce
// among them is SparCML's switch to dense where the sparse sum would cost more. The network is
// given (AggregatorOptions::network) or measured at the first exchange by a ping-pong between
// ranks 0 and 1 whose alpha and beta every rank then receives from rank 0, so all choose alike.

#include <cstddef>
#include <string_view>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

// The aggregators auto chooses from, in the order ties go.
const std::vector<std::string_view>& auto_candidates();

// The cheapest candidate for (workers, n, k, coding) on `network` by the closed forms.
std::string_view cheapest_aggregator(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding,
                                     const NetworkEstimate& network);

// Collective. Ranks 0 and 1 time round trips of 0 B to 1 MiB on the transport's clock (wall time;
// a simulated network's or SMPI's clock where there is one), the fastest of several each; rank 0
// fits one-way time = alpha + bytes * seconds_per_byte by least squares (neither below 0), and every
// rank receives that fit. One rank: a network that costs nothing.
NetworkEstimate measure_network(transport::Transport& t);

// What an auto aggregator decided, for reports: the network it used, and the choice of its last call.
struct AutoDecision {
  NetworkEstimate network;
  std::string_view last_choice;
};
// Null unless `aggregator` is auto's.
const AutoDecision* auto_decision(const Aggregator& aggregator);

}  // namespace sparsgd::collectives
