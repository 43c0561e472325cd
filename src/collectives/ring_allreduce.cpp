// Ring allreduce over point-to-point messages: reduce-scatter then allgather, 2(P-1) steps, each
// rank sending about 2(P-1)/P of the data: bandwidth-optimal, the textbook dense S-SGD exchange.
//
// Pipelined: a large chunk goes as several segments (ring_segments.hpp), and what a received
// segment needs (checking it, adding it in or copying it into place) runs while the next segment's
// messages are in flight. The data that a send needs was always received S items earlier, so with
// S >= 2 segments the pending work never touches what is being sent.

#include <algorithm>

#include "collectives/algorithms.hpp"

namespace sparsgd::collectives {

std::pair<std::size_t, std::size_t> ring_chunk(std::size_t size, int ranks, int c) {
  const auto p = static_cast<std::size_t>(ranks);
  const auto i = static_cast<std::size_t>(c);
  const std::size_t base = size / p;
  const std::size_t extra = size % p;
  const std::size_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

void ring_allreduce(transport::Transport& t, std::span<float> values, const wire::Expectation& expect,
                    std::uint32_t extra, int tag_base, std::size_t segment_values) {
  const int p = t.size();
  if (p == 1) return;
  const int r = t.rank();
  const int next = (r + 1) % p;
  const int prev = (r + p - 1) % p;
  const std::size_t segments = ring_segment_count(values.size(), p, segment_values);
  wire::Expectation from_prev = expect;
  from_prev.from_rank = prev;
  auto mod = [p](int x) { return ((x % p) + p) % p; };

  // One item: a segment sent and one received in one step of one phase.
  struct Item {
    bool reduce;  // reduce-scatter (add in) or allgather (copy into place)
    std::pair<std::size_t, std::size_t> send, receive;
  };
  auto item = [&](std::size_t i) {
    const auto per_phase = static_cast<std::size_t>(p - 1) * segments;
    const bool reduce = i < per_phase;
    const std::size_t within = reduce ? i : i - per_phase;
    const int step = static_cast<int>(within / segments);
    const std::size_t s = within % segments;
    const int send_chunk = reduce ? mod(r - step) : mod(r + 1 - step);
    const int receive_chunk = reduce ? mod(r - step - 1) : mod(r - step);
    return Item{reduce, ring_segment(ring_chunk(values.size(), p, send_chunk), s, segments),
                ring_segment(ring_chunk(values.size(), p, receive_chunk), s, segments)};
  };
  const std::size_t items = 2 * static_cast<std::size_t>(p - 1) * segments;

  std::vector<std::byte> out_message;
  std::vector<std::byte> in_messages[2];
  std::vector<float> incoming;
  auto finish = [&](const Item& it, const std::vector<std::byte>& message) {
    const std::size_t count = it.receive.second - it.receive.first;
    const std::span<float> target = values.subspan(it.receive.first, count);
    if (!it.reduce) {
      if (wire::decode_dense(message, from_prev, count, target) != extra) {
        throw wire::WireError("message from rank " + std::to_string(prev) +
                              ": checksum mismatch in the allgather phase");
      }
      return;
    }
    incoming.resize(count);
    if (wire::decode_dense(message, from_prev, count, incoming) != extra) {
      throw wire::WireError("message from rank " + std::to_string(prev) +
                            ": its checksum of the selected indices differs from this rank's: the workers did not "
                            "select the same entries");
    }
    for (std::size_t i = 0; i < count; ++i) target[i] += incoming[i];
  };
  // Items are finished in order; `finished` counts them. With one segment a step's send is what
  // the previous step received, so each item is finished before the next is sent. With more, the
  // last item is finished while the next is in flight (or right after, should a transport not run
  // work in flight).
  std::size_t finished = 0;
  auto finish_through = [&](std::size_t last) {
    for (; finished <= last; ++finished) finish(item(finished), in_messages[finished % 2]);
  };
  const bool pipelined = segments >= 2;
  for (std::size_t i = 0; i < items; ++i) {
    const Item it = item(i);
    wire::encode_dense(expect.algorithm, expect.n, expect.k,
                       values.subspan(it.send.first, it.send.second - it.send.first), extra, out_message);
    const int tag = tag_base + (it.reduce ? 0 : 1);
    transport::InFlightWork previous;
    if (pipelined && i > 0) previous = [&finish_through, i] { finish_through(i - 1); };
    t.sendrecv(next, tag, out_message, prev, tag, in_messages[i % 2],
               wire::dense_message_bytes(it.receive.second - it.receive.first), previous);
    if (i > 0) finish_through(i - 1);
    if (!pipelined) finish_through(i);
  }
  finish_through(items - 1);
}

}  // namespace sparsgd::collectives
