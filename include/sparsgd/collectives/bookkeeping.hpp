#pragma once
// Small collectives for the trainer's bookkeeping rather than gradient exchange: the initial
// parameters from rank 0, and sums of a few statistics (correct predictions, losses). Their
// messages are raw arrays whose length every receiver checks.

#include <span>

#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

// Copies rank `root`'s values to every rank along a binomial tree (ceil(log2 P) rounds). All ranks
// must pass the same length; a rank that receives another length throws.
void broadcast(transport::Transport& t, std::span<float> values, int root = 0);

// Sums a short array over all ranks (through rank 0, in rank order, so every rank gets the
// bitwise same result).
void allreduce_sum(transport::Transport& t, std::span<double> values);

}  // namespace sparsgd::collectives
