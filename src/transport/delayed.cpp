#include "sparsgd/transport/delayed.hpp"

#include <thread>

#include "sparsgd/core/error.hpp"

namespace sparsgd::transport {

DelayedTransport::DelayedTransport(Transport& inner, std::chrono::microseconds delay)
    : TransportWrapper(inner), delay_(delay) {
  SPARSGD_ENFORCE(delay.count() >= 0, "a transport's delay must be >= 0, got " << delay.count() << " us");
}

void DelayedTransport::barrier() {
  inner_.set_timeout(timeout());
  inner_.barrier();
}

void DelayedTransport::do_send(int peer, int tag, std::span<const std::byte> data) {
  std::this_thread::sleep_for(delay_);
  inner_.set_timeout(timeout());
  inner_.send(peer, tag, data);
}

std::size_t DelayedTransport::do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  inner_.set_timeout(timeout());
  return inner_.recv(peer, tag, buffer, max_bytes);
}

std::unique_ptr<PendingOperation> DelayedTransport::do_post_send(int peer, int tag, std::span<const std::byte> data) {
  std::this_thread::sleep_for(delay_);
  return TransportWrapper::do_post_send(peer, tag, data);
}

}  // namespace sparsgd::transport
