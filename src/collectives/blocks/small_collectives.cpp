#include "sparsgd/collectives/small_collectives.hpp"
#include "collectives/blocks/tags.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace sparsgd::collectives {
namespace {

const int kBroadcastTag = tag_block(TagUser::small_collectives)[tag_offsets::kBroadcast];
const int kGatherTag = tag_block(TagUser::small_collectives)[tag_offsets::kGather];
const int kScatterTag = tag_block(TagUser::small_collectives)[tag_offsets::kScatter];
const int kReduceTag = tag_block(TagUser::small_collectives)[tag_offsets::kReduce];
const int kMaxTag = tag_block(TagUser::small_collectives)[tag_offsets::kMaxReduce];

template <typename T>
void receive_exactly(transport::Transport& t, int peer, int tag, std::span<T> out, std::vector<std::byte>& buffer) {
  const std::size_t bytes = out.size_bytes();
  if (t.recv(peer, tag, buffer, bytes) != bytes) {
    throw transport::TransportError("rank " + std::to_string(t.rank()) + ": rank " + std::to_string(peer) + " sent " +
                                    std::to_string(buffer.size()) + " bytes where " + std::to_string(bytes) +
                                    " were expected: the ranks disagree on the array length");
  }
  if (bytes > 0) std::memcpy(out.data(), buffer.data(), bytes);
}

template <typename T>
void broadcast_values(transport::Transport& t, std::span<T> values, int root) {
  const int p = t.size();
  SPARSGD_ENFORCE(root >= 0 && root < p, "broadcast root out of range");
  if (p == 1) return;
  const int relative = (t.rank() - root + p) % p;
  std::vector<std::byte> buffer;
  int mask = 1;
  // Receive from the parent: the rank that differs in this rank's lowest set bit.
  while (mask < p) {
    if (relative & mask) {
      receive_exactly(t, (relative - mask + root) % p, kBroadcastTag, values, buffer);
      break;
    }
    mask <<= 1;
  }
  // Send to the children below that bit, largest subtree first.
  mask >>= 1;
  while (mask > 0) {
    if (relative + mask < p) t.send((relative + mask + root) % p, kBroadcastTag, std::as_bytes(values));
    mask >>= 1;
  }
}

}  // namespace

void broadcast(transport::Transport& t, std::span<float> values, int root) { broadcast_values(t, values, root); }

void allreduce_max(transport::Transport& t, std::span<double> values) {
  const int p = t.size();
  const int rank = t.rank();
  for (const double v : values) {
    SPARSGD_ENFORCE(std::isfinite(v) && v >= 0.0, "allreduce_max takes finite values >= 0, not " << v);
  }
  std::vector<std::byte> buffer;
  std::vector<double> child(values.size());
  for (int mask = 1; mask < p; mask <<= 1) {
    if (rank & mask) {
      t.send(rank - mask, kMaxTag, std::as_bytes(values));
      break;
    }
    if (rank + mask < p) {
      receive_exactly(t, rank + mask, kMaxTag, std::span<double>(child), buffer);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (!(std::isfinite(child[i]) && child[i] >= 0.0)) {
          throw transport::TransportError("rank " + std::to_string(rank) + ": rank " + std::to_string(rank + mask) +
                                          " sent " + std::to_string(child[i]) +
                                          " where a time (finite, >= 0) was expected");
        }
        values[i] = std::max(values[i], child[i]);
      }
    }
  }
  broadcast_values(t, values, 0);
}

RankTraffic allreduce_max_traffic(int workers, int rank, std::size_t values) {
  RankTraffic traffic;
  // The reduction: every rank but 0 sends once, to the rank that differs in its lowest set bit.
  if (rank != 0) ++traffic.messages;
  // The broadcast: to the children below that bit (below the top for rank 0).
  int lowest = 1;
  while (lowest < workers && (rank & lowest) == 0) lowest <<= 1;
  for (int mask = lowest >> 1; mask > 0; mask >>= 1) {
    if (rank + mask < workers) ++traffic.messages;
  }
  traffic.bytes = traffic.messages * values * sizeof(double);
  return traffic;
}

void allreduce_sum(transport::Transport& t, std::span<double> values) {
  const int p = t.size();
  if (p == 1) return;
  std::vector<std::byte> buffer;
  if (t.rank() == 0) {
    std::vector<double> incoming(values.size());
    for (int r = 1; r < p; ++r) {
      receive_exactly(t, r, kGatherTag, std::span<double>(incoming), buffer);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] += incoming[i];
    }
    for (int r = 1; r < p; ++r) t.send(r, kScatterTag, std::as_bytes(values));
  } else {
    t.send(0, kGatherTag, std::as_bytes(values));
    receive_exactly(t, 0, kScatterTag, values, buffer);
  }
}

int lowest_flagged_rank(transport::Transport& t, bool flagged) {
  const int p = t.size();
  const int rank = t.rank();
  // Ranks fit a float exactly (P <= 2^24), so the broadcast can carry the answer as it is.
  float lowest = flagged ? static_cast<float>(rank) : static_cast<float>(p);
  std::vector<std::byte> buffer;
  for (int mask = 1; mask < p; mask <<= 1) {
    if (rank & mask) {
      t.send(rank - mask, kReduceTag, std::as_bytes(std::span<const float>(&lowest, 1)));
      break;
    }
    if (rank + mask < p) {
      float child = 0.0f;
      receive_exactly(t, rank + mask, kReduceTag, std::span<float>(&child, 1), buffer);
      if (!(child >= 0.0f && child <= static_cast<float>(p)) || child != static_cast<float>(static_cast<int>(child))) {
        throw transport::TransportError("rank " + std::to_string(rank) + ": rank " + std::to_string(rank + mask) +
                                        " sent a malformed rank in the skip agreement");
      }
      lowest = std::min(lowest, child);
    }
  }
  broadcast(t, std::span<float>(&lowest, 1), 0);
  const int answer = static_cast<int>(lowest);
  return answer >= p ? -1 : answer;
}

}  // namespace sparsgd::collectives
