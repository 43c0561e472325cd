#include "sparsgd/transport/transport.hpp"

#include <chrono>
#include <exception>
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

namespace {

// A posted send that the default completed when it was posted.
class CompletedSend final : public PendingOperation {
 public:
  explicit CompletedSend(std::size_t bytes) : bytes_(bytes) {}
  std::size_t wait() override { return bytes_; }
  bool test() override { return true; }

 private:
  std::size_t bytes_;
};

}  // namespace

// The default posted receive: a recv run at wait(), in the order the receives were posted.
class Transport::DeferredReceive final : public PendingOperation {
 public:
  DeferredReceive(Transport& t, int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes)
      : t_(t), peer_(peer), tag_(tag), buffer_(buffer), max_bytes_(max_bytes), sequence_(order().posted++) {}

  std::size_t wait() override {
    ReceiveOrder& o = order();
    while (o.abandoned.erase(o.next) > 0) ++o.next;
    if (sequence_ != o.next) {
      throw TransportError("rank " + std::to_string(t_.rank()) + ": receives posted for rank " + std::to_string(peer_) +
                           " and tag " + std::to_string(tag_) + " were waited for out of the order they were posted " +
                           "in (this transport receives at wait time, so messages would be matched to the wrong receive)");
    }
    const std::size_t bytes = t_.do_recv(peer_, tag_, buffer_, max_bytes_);
    ++o.next;
    forget_if_idle();
    return bytes;
  }

  void abandon() noexcept override {
    ReceiveOrder& o = order();
    if (sequence_ == o.next) {
      ++o.next;
    } else {
      o.abandoned.insert(sequence_);
    }
    forget_if_idle();
  }

 private:
  ReceiveOrder& order() { return t_.receive_order_[{peer_, tag_}]; }
  // With no receive outstanding for this peer and tag, its entry goes (numbering restarts at 0).
  void forget_if_idle() {
    ReceiveOrder& o = order();
    while (o.abandoned.erase(o.next) > 0) ++o.next;
    if (o.next == o.posted) t_.receive_order_.erase({peer_, tag_});
  }
  Transport& t_;
  int peer_, tag_;
  std::vector<std::byte>& buffer_;
  std::size_t max_bytes_;
  std::uint64_t sequence_;
};

Request Transport::post_send(int peer, int tag, std::span<const std::byte> data) {
  check_peer(peer, "post_send");
  return Request(*this, do_post_send(peer, tag, data), true);
}

Request Transport::post_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  check_peer(peer, "post_recv");
  return Request(*this, do_post_recv(peer, tag, buffer, max_bytes), false);
}

std::unique_ptr<PendingOperation> Transport::do_post_send(int peer, int tag, std::span<const std::byte> data) {
  do_send(peer, tag, data);
  return std::make_unique<CompletedSend>(data.size());
}

std::unique_ptr<PendingOperation> Transport::do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                          std::size_t max_bytes) {
  return std::make_unique<DeferredReceive>(*this, peer, tag, buffer, max_bytes);
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (op_) op_->abandon();
    owner_ = other.owner_;
    op_ = std::move(other.op_);
    is_send_ = other.is_send_;
    bytes_ = other.bytes_;
  }
  return *this;
}

Request::~Request() {
  if (op_) op_->abandon();
}

void Request::finish(std::size_t bytes) {
  op_.reset();
  bytes_ = bytes;
  TrafficCounters& c = owner_->counters_;
  if (is_send_) {
    c.bytes_sent += bytes;
    c.messages_sent += 1;
  } else {
    c.bytes_received += bytes;
    c.messages_received += 1;
  }
}

std::size_t Request::wait() {
  if (!op_) throw TransportError("waiting for a request that is not pending (never posted, or already finished)");
  finish(op_->wait());
  return bytes_;
}

bool Request::test() {
  if (!op_) return true;
  if (!op_->test()) return false;
  finish(op_->wait());
  return true;
}

void wait_all(std::span<Request> requests) {
  std::exception_ptr first;
  for (Request& r : requests) {
    if (!r.pending()) continue;
    if (first) {
      r = Request();  // abandons it
      continue;
    }
    try {
      r.wait();
    } catch (...) {
      first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace sparsgd::transport
