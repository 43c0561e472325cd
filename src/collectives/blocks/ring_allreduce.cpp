// Ring allreduce over point-to-point messages: reduce-scatter then allgather, 2(P-1) steps, each
// rank sending about 2(P-1)/P of the data: bandwidth-optimal, the textbook dense S-SGD exchange.

#include <algorithm>

#include "collectives/blocks/aggregator_support.hpp"

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
                    std::uint32_t extra, int tag_base) {
  const int p = t.size();
  if (p == 1) return;
  const int r = t.rank();
  const int next = (r + 1) % p;
  const int prev = (r + p - 1) % p;
  std::vector<std::byte> out_message, in_message;
  std::vector<float> incoming;
  wire::Expectation from_prev = expect;
  from_prev.from_rank = prev;
  auto mod = [p](int x) { return ((x % p) + p) % p; };
  for (int step = 0; step < p - 1; ++step) {
    const auto [sb, se] = ring_chunk(values.size(), p, mod(r - step));
    const auto [rb, re] = ring_chunk(values.size(), p, mod(r - step - 1));
    wire::encode_dense(expect.algorithm, expect.n, expect.k, values.subspan(sb, se - sb), extra, out_message);
    t.sendrecv(next, tag_base, out_message, prev, tag_base, in_message, wire::dense_message_bytes(re - rb));
    incoming.resize(re - rb);
    if (wire::decode_dense(in_message, from_prev, re - rb, incoming) != extra) {
      throw wire::WireError("message from rank " + std::to_string(prev) +
                            ": its checksum of the selected indices differs from this rank's: the workers did not "
                            "select the same entries");
    }
    for (std::size_t i = 0; i < incoming.size(); ++i) values[rb + i] += incoming[i];
  }
  for (int step = 0; step < p - 1; ++step) {
    const auto [sb, se] = ring_chunk(values.size(), p, mod(r + 1 - step));
    const auto [rb, re] = ring_chunk(values.size(), p, mod(r - step));
    wire::encode_dense(expect.algorithm, expect.n, expect.k, values.subspan(sb, se - sb), extra, out_message);
    t.sendrecv(next, tag_base + 1, out_message, prev, tag_base + 1, in_message, wire::dense_message_bytes(re - rb));
    if (wire::decode_dense(in_message, from_prev, re - rb, values.subspan(rb, re - rb)) != extra) {
      throw wire::WireError("message from rank " + std::to_string(prev) + ": checksum mismatch in the allgather phase");
    }
  }
}

}  // namespace sparsgd::collectives
