#include "collectives/blocks/count_allreduce.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "collectives/blocks/closed_form.hpp"

namespace sparsgd::collectives {
namespace {

void check_length(const transport::Transport& t, int peer, std::size_t got, std::size_t bytes) {
  if (got != bytes) {
    throw transport::TransportError("rank " + std::to_string(t.rank()) + ": rank " + std::to_string(peer) + " sent " +
                                    std::to_string(got) + " bytes of counts where " + std::to_string(bytes) +
                                    " were expected: the ranks disagree on the collective's shape");
  }
}

template <typename Count>
void receive_counts(transport::Transport& t, int peer, int tag, std::vector<std::byte>& buffer, std::size_t count) {
  const std::size_t bytes = count * sizeof(Count);
  check_length(t, peer, t.recv(peer, tag, buffer, bytes), bytes);
}

[[noreturn]] void implausible(const transport::Transport& t, int peer, std::uint64_t limit) {
  throw transport::TransportError("rank " + std::to_string(t.rank()) + ": rank " + std::to_string(peer) +
                                  " sent counts whose sums exceed " + std::to_string(limit) +
                                  ", more than all ranks can hold: the ranks disagree on the data or a message is corrupt");
}

template <typename Count>
void add_checked(transport::Transport& t, int peer, std::span<Count> into, const std::vector<std::byte>& from,
                 std::uint64_t limit) {
  for (std::size_t i = 0; i < into.size(); ++i) {
    Count v;
    std::memcpy(&v, from.data() + i * sizeof(Count), sizeof(Count));
    const auto mine = static_cast<std::uint64_t>(into[i]);
    const auto theirs = static_cast<std::uint64_t>(v);
    if (theirs > limit || mine > limit - theirs) implausible(t, peer, limit);
    into[i] = static_cast<Count>(mine + theirs);
  }
}

}  // namespace

template <typename Count>
void allreduce_counts(transport::Transport& t, std::span<Count> counts, std::uint64_t limit, int tag_base) {
  const int p = t.size();
  const int r = t.rank();
  if (p == 1) return;
  const int p2 = closed_form::power_of_two_floor(p);
  std::vector<std::byte> buffer;
  const std::span<const std::byte> mine = std::as_bytes(std::span<const Count>(counts));
  if (r >= p2) {
    t.send(r - p2, tag_base, mine);
    receive_counts<Count>(t, r - p2, tag_base + 1, buffer, counts.size());
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = 0;
    add_checked(t, r - p2, counts, buffer, limit);
    return;
  }
  if (r + p2 < p) {
    receive_counts<Count>(t, r + p2, tag_base, buffer, counts.size());
    add_checked(t, r + p2, counts, buffer, limit);
  }
  int round = 0;
  for (int dist = 1; dist < p2; dist <<= 1, ++round) {
    const int partner = r ^ dist;
    const std::size_t bytes = counts.size_bytes();
    check_length(t, partner, t.sendrecv(partner, tag_base + 2 + round, mine, partner, tag_base + 2 + round, buffer, bytes),
                 bytes);
    add_checked(t, partner, counts, buffer, limit);
  }
  if (r + p2 < p) t.send(r + p2, tag_base + 1, mine);
}

template void allreduce_counts<std::uint32_t>(transport::Transport&, std::span<std::uint32_t>, std::uint64_t, int);
template void allreduce_counts<std::uint64_t>(transport::Transport&, std::span<std::uint64_t>, std::uint64_t, int);

RankTraffic count_allreduce_traffic(int workers, int rank, std::size_t bytes) {
  if (workers < 2) return {};
  const int p2 = closed_form::power_of_two_floor(workers);
  if (rank >= p2) return {bytes, 1};
  RankTraffic t;
  t.messages = static_cast<std::uint64_t>(closed_form::ceil_log2(p2)) + (rank + p2 < workers ? 1 : 0);
  t.bytes = t.messages * bytes;
  return t;
}

int count_allreduce_critical_messages(int workers) {
  if (workers < 2) return 0;
  const int p2 = closed_form::power_of_two_floor(workers);
  return closed_form::ceil_log2(p2) + (p2 != workers ? 2 : 0);
}

}  // namespace sparsgd::collectives
