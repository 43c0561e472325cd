#pragma once
// Bytes and messages each rank sends in one aggregation, counted from each algorithm's structure
// (every selection holds exactly k entries, as topk and randk give).

#include <cstddef>
#include <cstdint>
#include <string>

#include "sparsgd/core/wire.hpp"

namespace sparsgd::testing {

struct Traffic {
  std::uint64_t bytes = 0;
  std::uint64_t messages = 0;
};

inline std::size_t chunk_size(std::size_t size, int p, int c) {
  const auto base = size / static_cast<std::size_t>(p);
  const auto extra = size % static_cast<std::size_t>(p);
  return base + (static_cast<std::size_t>(c) < extra ? 1 : 0);
}

inline Traffic ring_traffic(std::size_t values, int p, int r) {
  Traffic t;
  if (p == 1) return t;
  auto mod = [p](int x) { return ((x % p) + p) % p; };
  for (int s = 0; s < p - 1; ++s) t.bytes += wire::dense_message_bytes(chunk_size(values, p, mod(r - s)));
  for (int s = 0; s < p - 1; ++s) t.bytes += wire::dense_message_bytes(chunk_size(values, p, mod(r + 1 - s)));
  t.messages = 2 * static_cast<std::uint64_t>(p - 1);
  return t;
}

inline Traffic expected_traffic(const std::string& aggregator, int p, int r, std::size_t n, std::size_t k) {
  Traffic t;
  const std::uint64_t pairs = wire::sparse_message_bytes(k);
  const std::uint64_t pairs_with_mask = wire::sparse_message_bytes(k, k);
  if (aggregator == "dense") return ring_traffic(n, p, r);
  if (aggregator == "randk-shared") return ring_traffic(k, p, r);
  if (aggregator == "allgather") {
    for (int dist = 1; dist < p; dist *= 2) ++t.messages;
    t.bytes = static_cast<std::uint64_t>(p - 1) * pairs;
    return t;
  }
  if (aggregator == "gtopk") {
    if (r != 0) {  // one message up to the parent
      t.bytes += pairs;
      ++t.messages;
    }
    // One broadcast message to each child: rank r + m for each power of two m below r's lowest
    // set bit (every power of two for the root), inside [0, P).
    for (int m = 1; m < p; m <<= 1) {
      if (r != 0 && m >= (r & -r)) break;
      if (r + m < p) {
        t.bytes += pairs_with_mask;
        ++t.messages;
      }
    }
    return t;
  }
  if (aggregator == "gtopk-rd") {
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    if (r >= p2) return {pairs, 1};
    for (int dist = 1; dist < p2; dist <<= 1) {
      t.bytes += pairs;
      ++t.messages;
    }
    if (r < p - p2) {
      t.bytes += pairs_with_mask;
      ++t.messages;
    }
    return t;
  }
  return t;
}

// The dense sum through a transport's own allreduce (MPI_Allreduce, a c10d group's allreduce): its
// algorithm is not visible, so the transport counts what the ring would send without the ring's
// message headers.
// What a message with compressed indices adds to a raw one at most: the length of the index code
// and the code's own 2-byte prefix.
inline std::uint64_t compressed_framing_bytes() {
  return wire::max_sparse_message_bytes(0, 0, wire::IndexCoding::compressed) - wire::sparse_message_bytes(0);
}

inline Traffic native_allreduce_traffic(std::size_t n, int p) {
  const auto workers = static_cast<std::uint64_t>(p);
  if (workers < 2) return {};
  return {2 * (workers - 1) * n * 4 / workers, 2 * (workers - 1)};
}

}  // namespace sparsgd::testing
