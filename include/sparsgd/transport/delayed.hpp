#pragma once
// A transport that holds each message back for a fixed time before it leaves: a slow link's
// latency felt on the wall clock (the network model, network_model.hpp, charges its own clock
// instead). What tests of overlap use: work that overlaps the exchange hides these waits.

#include <chrono>

#include "sparsgd/transport/wrapper.hpp"

namespace sparsgd::transport {

class DelayedTransport final : public TransportWrapper {
 public:
  // Throws InvalidArgument for a negative delay.
  DelayedTransport(Transport& inner, std::chrono::microseconds delay);
  void barrier() override;
  std::chrono::microseconds delay() const { return delay_; }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override;
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override;
  std::unique_ptr<PendingOperation> do_post_send(int peer, int tag, std::span<const std::byte> data) override;

 private:
  std::chrono::microseconds delay_;
};

}  // namespace sparsgd::transport
