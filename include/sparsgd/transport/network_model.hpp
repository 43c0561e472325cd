#pragma once
// A network model that wraps any transport and charges each message alpha + bytes / bandwidth on a
// per-worker virtual clock, so that one machine can report what an iteration would take on a slow
// cluster.
//
// Model: a worker's link sends one message at a time; a send occupies the sender for
// bytes / bandwidth and the message arrives alpha later than its last byte left; a receive cannot
// complete before the message has arrived. Links are full duplex, and the receiving side's link is
// not modelled as a bottleneck (every algorithm here receives from one peer at a time). Time spent
// computing between communication calls is charged as measured thread CPU time, so that
// time-sharing the cores among more workers than cores does not inflate it. The wrapper's own
// copying is not charged. Each message carries its arrival time in an 8-byte prefix that the
// counters of this wrapper do not count.

#include <algorithm>
#include <string>

#include "sparsgd/transport/transport.hpp"
#include "sparsgd/transport/wrapper.hpp"

namespace sparsgd::transport {

struct NetworkSpec {
  std::string name = "none";
  double alpha_seconds = 0.0;      // per-message latency
  double bytes_per_second = 0.0;   // 0: no model
  bool enabled() const { return bytes_per_second > 0.0; }
  // Closed-form cost of one message of `bytes`.
  double message_seconds(double bytes) const { return alpha_seconds + bytes / bytes_per_second; }
};

// none | 1gbe (50 us, 1 Gbit/s) | 10gbe (20 us, 10 Gbit/s) | paper-1gbe (0.436 ms, 9 ns per byte:
// the gTop-k authors' fit of their cluster) | alpha=SECONDS,bw=BITS_PER_SECOND.
// Throws InvalidArgument naming the accepted forms.
NetworkSpec parse_network(const std::string& spec);

// Thread CPU time of the calling thread, in seconds.
double thread_cpu_seconds();

class SimulatedNetwork final : public TransportWrapper {
 public:
  SimulatedNetwork(Transport& inner, NetworkSpec spec);
  // Synchronizes with the inner transport; the virtual clocks are left as they are.
  void barrier() override;

  // The virtual clock in seconds, after charging the compute time since the last call.
  double now();
  // The transport's clock is the virtual one (with the compute not yet charged).
  double clock_seconds() const override { return clock_ + std::max(0.0, thread_cpu_seconds() - cpu_mark_); }
  // Drops the compute time since the last call from the clock (work that the simulated run would
  // not do, such as evaluation or bookkeeping).
  void discard_compute() { mark_compute(); }
  // Sets the clock (for instance to the maximum over workers at an iteration boundary).
  void set_clock(double seconds);
  const NetworkSpec& spec() const { return spec_; }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override;
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override;
  // Forwarded as one sendrecv, so that rendezvous transports underneath cannot deadlock. The work in
  // flight starts on the clock when the send does, while the link transmits (a non-blocking send),
  // and the exchange ends when both the send has left and the receive has arrived.
  std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                          std::vector<std::byte>& buffer, std::size_t max_bytes,
                          const InFlightWork& while_in_flight) override;
  // A posted send books the link at once (messages leave one after the other, in the order they
  // were posted) and is done, on the clock, when its last byte has left; a posted receive is
  // done when its message has arrived. Compute between the post and the wait runs meanwhile.
  std::unique_ptr<PendingOperation> do_post_send(int peer, int tag, std::span<const std::byte> data) override;
  std::unique_ptr<PendingOperation> do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                 std::size_t max_bytes) override;

 private:
  class PostedSend;
  class PostedReceive;
  // Stamps `data` with its arrival time (a trailer) into `framed` and books this worker's link until it has
  // left; returns when that is.
  double frame_outgoing(std::span<const std::byte> data, std::vector<std::byte>& framed);
  void frame_outgoing(std::span<const std::byte> data) { frame_outgoing(data, framed_); }
  // Strips the stamp off a received message and waits (on the clock) for its arrival.
  std::size_t unframe_incoming(int peer, std::vector<std::byte>& buffer, std::size_t framed);
  void charge_compute();
  void mark_compute();
  NetworkSpec spec_;
  double clock_ = 0.0;
  double link_free_ = 0.0;
  double cpu_mark_ = 0.0;
  std::vector<std::byte> framed_;
  // The frames of posted sends that have completed, for the next posted sends to stamp into: a
  // fresh vector per message would allocate (and, past glibc's mmap threshold, fault in) every
  // message's size anew, and shape the heap the charged code then works in. Never more than the
  // most posted sends that were in flight at once.
  std::vector<std::vector<std::byte>> spare_frames_;
};

}  // namespace sparsgd::transport
