#pragma once
// Small collectives for the trainer's bookkeeping rather than gradient exchange: the initial
// parameters from rank 0, and sums of a few statistics (correct predictions, losses). Their
// messages are raw arrays whose length every receiver checks.

#include <span>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

// Copies rank `root`'s values to every rank along a binomial tree (ceil(log2 P) rounds). All ranks
// must pass the same length; a rank that receives another length throws.
void broadcast(transport::Transport& t, std::span<float> values, int root = 0);

// Sums a short array over all ranks (through rank 0, in rank order, so every rank gets the
// bitwise same result).
void allreduce_sum(transport::Transport& t, std::span<double> values);

// Element-wise maxima of a short array over all ranks, on every rank: a binomial-tree reduction to
// rank 0 and a broadcast back, 2 ceil(log2 P) message rounds. All ranks pass the same length; values
// must be finite and >= 0 (times): a rank that receives another throws TransportError.
void allreduce_max(transport::Transport& t, std::span<double> values);
// What `rank` sends in one allreduce_max of `values` doubles.
RankTraffic allreduce_max_traffic(int workers, int rank, std::size_t values);

// The lowest rank whose `flagged` is true, or -1 if none: a binomial-tree reduction to rank 0 and
// a broadcast back, 2 ceil(log2 P) message rounds of 4 bytes. Lets all ranks agree to skip a step
// that one of them cannot take (a non-finite gradient).
int lowest_flagged_rank(transport::Transport& t, bool flagged);

}  // namespace sparsgd::collectives
