#pragma once
// Sums short arrays of counts over all ranks by recursive doubling, for collectives that decide
// together from global counts (Ok-Topk's region boundaries and its magnitude histograms). Integer
// sums do not depend on their order, so every rank ends with the same array.

#include <cstddef>
#include <cstdint>
#include <span>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

// Sums `counts` over all ranks in place: log2(P') exchange rounds (P' the largest power of two
// <= P), the ranks beyond P' folding theirs in before and receiving the sums after. Every rank
// must pass the same length. A partial sum above `limit` (what no honest set of ranks can reach)
// or a message of another length is a TransportError naming the peer. Tags: tag_base (fold),
// tag_base + 1 (unfold), tag_base + 2 + round.
template <typename Count>
void allreduce_counts(transport::Transport& t, std::span<Count> counts, std::uint64_t limit, int tag_base);

extern template void allreduce_counts<std::uint32_t>(transport::Transport&, std::span<std::uint32_t>, std::uint64_t,
                                                     int);
extern template void allreduce_counts<std::uint64_t>(transport::Transport&, std::span<std::uint64_t>, std::uint64_t,
                                                     int);

// What `rank` sends in one allreduce_counts of `bytes` bytes, and the messages on the critical path.
RankTraffic count_allreduce_traffic(int workers, int rank, std::size_t bytes);
int count_allreduce_critical_messages(int workers);

}  // namespace sparsgd::collectives
