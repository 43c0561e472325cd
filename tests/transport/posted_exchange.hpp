#pragma once
// An all-to-all over posted sends and receives, checked byte for byte: shared by the in-process
// tests and the MPI test program, so that every transport runs the same exchange.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparsgd/transport/transport.hpp"

namespace sparsgd::testing {

// Message m (of two) from rank a to rank b: its length and byte j differ by (a, b, m), so a
// message matched to the wrong receive is seen.
inline std::size_t posted_length(std::size_t base, int a, int b, int m) {
  return base == 0 ? 0 : base + static_cast<std::size_t>((a * 3 + b * 5 + m * 7) % 11) * 17;
}
inline std::byte posted_byte(int a, int b, int m, std::size_t j) {
  return static_cast<std::byte>((a * 31 + b * 7 + m * 101 + static_cast<int>(j % 251)) & 0xff);
}

// Every rank sends two messages with the same tag to every other rank and receives two from each.
// sends_first: the sends are posted before the receives (deadlocks on a transport whose posted
// send blocks until a receive is posted, such as blocking MPI sends of large messages).
// Requests are waited for in an order unlike the posting order, but receives from one peer in
// the order posted. Returns "" or the first fault found.
inline std::string posted_all_to_all(transport::Transport& t, std::size_t base, bool sends_first, int tag = 77) {
  const int p = t.size(), r = t.rank();
  std::vector<std::vector<std::byte>> outgoing, incoming(static_cast<std::size_t>(2 * p));
  std::vector<transport::Request> sends, receives;
  std::vector<std::pair<int, int>> received_from;  // (peer, message) of receives[i]
  auto post_sends = [&] {
    for (int s = 1; s < p; ++s) {
      const int to = (r + s) % p;
      for (int m = 0; m < 2; ++m) {
        std::vector<std::byte> data(posted_length(base, r, to, m));
        for (std::size_t j = 0; j < data.size(); ++j) data[j] = posted_byte(r, to, m, j);
        outgoing.push_back(std::move(data));
      }
    }
    // Posted only once every buffer is in place: outgoing must not move under a pending send.
    std::size_t i = 0;
    for (int s = 1; s < p; ++s) {
      for (int m = 0; m < 2; ++m) sends.push_back(t.post_send((r + s) % p, tag, outgoing[i++]));
    }
  };
  auto post_receives = [&] {
    for (int s = 1; s < p; ++s) {
      const int from = (r - s + p) % p;
      for (int m = 0; m < 2; ++m) {
        const std::size_t length = posted_length(base, from, r, m);
        receives.push_back(t.post_recv(from, tag, incoming[static_cast<std::size_t>(2 * from + m)], length));
        received_from.emplace_back(from, m);
      }
    }
  };
  if (sends_first) {
    post_sends();
    post_receives();
  } else {
    post_receives();
    post_sends();
  }
  // Receives from the last peer posted first, then the sends in reverse.
  for (std::size_t pair = receives.size() / 2; pair-- > 0;) {
    for (std::size_t m = 0; m < 2; ++m) receives[2 * pair + m].wait();
  }
  for (std::size_t i = sends.size(); i-- > 0;) sends[i].wait();
  for (const auto& [from, m] : received_from) {
    const std::vector<std::byte>& got = incoming[static_cast<std::size_t>(2 * from + m)];
    const std::size_t length = posted_length(base, from, r, m);
    if (got.size() != length) {
      return "rank " + std::to_string(r) + ": message " + std::to_string(m) + " from rank " + std::to_string(from) +
             " has " + std::to_string(got.size()) + " bytes, expected " + std::to_string(length);
    }
    for (std::size_t j = 0; j < length; ++j) {
      if (got[j] != posted_byte(from, r, m, j)) {
        return "rank " + std::to_string(r) + ": message " + std::to_string(m) + " from rank " + std::to_string(from) +
               " differs at byte " + std::to_string(j);
      }
    }
  }
  return "";
}

}  // namespace sparsgd::testing
