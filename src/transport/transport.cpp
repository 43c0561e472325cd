#include "sparsgd/transport/transport.hpp"

#include <chrono>
#include <string>

namespace sparsgd::transport {

void Transport::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw TransportError("rank " + std::to_string(rank()) + ": " + what + " with invalid peer " +
                         std::to_string(peer) + " (size " + std::to_string(size()) + ")");
  }
}

void Transport::send(int peer, int tag, std::span<const std::byte> data) {
  check_peer(peer, "send");
  do_send(peer, tag, data);
  counters_.bytes_sent += data.size();
  counters_.messages_sent += 1;
}

std::size_t Transport::recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  check_peer(peer, "recv");
  const std::size_t bytes = do_recv(peer, tag, buffer, max_bytes);
  counters_.bytes_received += bytes;
  counters_.messages_received += 1;
  return bytes;
}

std::size_t Transport::sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer,
                                int recv_tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                const InFlightWork& while_in_flight) {
  check_peer(send_peer, "sendrecv");
  check_peer(recv_peer, "sendrecv");
  const std::size_t bytes =
      do_sendrecv(send_peer, send_tag, data, recv_peer, recv_tag, buffer, max_bytes, while_in_flight);
  counters_.bytes_sent += data.size();
  counters_.messages_sent += 1;
  counters_.bytes_received += bytes;
  counters_.messages_received += 1;
  return bytes;
}

double Transport::clock_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t Transport::do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer,
                                   int recv_tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                   const InFlightWork& while_in_flight) {
  do_send(send_peer, send_tag, data);
  if (while_in_flight) while_in_flight();
  return do_recv(recv_peer, recv_tag, buffer, max_bytes);
}

}  // namespace sparsgd::transport
