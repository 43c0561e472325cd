#pragma once
// Bytes and messages each rank sends in one aggregation, counted from each algorithm's structure
// (every selection holds exactly k entries, as topk and randk give).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::testing {

struct Traffic {
  std::uint64_t bytes = 0;
  std::uint64_t messages = 0;
};

// The aggregator's own closed form (its descriptor), counted from its schedule, not from a run:
// what rank r sends in a first call on these selections (each of k entries unless the aggregator's
// traffic depends on where the entries lie).
inline Traffic expected_traffic(const std::string& aggregator, const std::vector<SparseVector>& selections, int r,
                                std::size_t k) {
  const collectives::AggregatorDescriptor& d = collectives::find_aggregator(aggregator);
  const collectives::RankTraffic t = d.traffic_of != nullptr
                                         ? d.traffic_of(selections, k, r)
                                         : d.traffic(static_cast<int>(selections.size()), r, selections.front().dim, k);
  return {t.bytes, t.messages};
}

// What a message with compressed indices adds to a raw one at most: the length of the index code
// and the code's own 2-byte prefix.
inline std::uint64_t compressed_framing_bytes() {
  return wire::max_sparse_message_bytes(0, 0, wire::IndexCoding::compressed) - wire::sparse_message_bytes(0);
}

// The dense sum through a transport's own allreduce (MPI_Allreduce, a c10d group's allreduce): its
// algorithm is not visible, so the transport counts what the ring would send without the ring's
// message headers.
inline Traffic native_allreduce_traffic(std::size_t n, int p) {
  const auto workers = static_cast<std::uint64_t>(p);
  if (workers < 2) return {};
  return {2 * (workers - 1) * n * 4 / workers, 2 * (workers - 1)};
}

}  // namespace sparsgd::testing
