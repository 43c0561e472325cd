#pragma once
// The narrow interface every collective is written against (layer 4 of DESIGN.md): rank, size,
// point-to-point messages of bytes with a tag, barrier, and traffic counters.
//
// Matching: recv(peer, tag) takes the oldest unreceived message that `peer` sent to this rank with
// `tag`. Sends may be buffered; pairwise exchanges must use sendrecv so that transports with
// rendezvous sends (MPI for large messages) cannot deadlock.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace sparsgd::transport {

// Work a caller runs while an exchange is in flight (see Transport::sendrecv).
using InFlightWork = std::function<void()>;

// A communication failure: a timeout (naming the peer), a peer that failed or vanished, a message
// that does not fit what the receiver expects.
class TransportError : public Error {
 public:
  using Error::Error;
};

// Thrown in a worker whose wait was ended because another worker failed first.
class PeerFailed : public TransportError {
 public:
  using TransportError::TransportError;
};

struct TrafficCounters {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
};

inline constexpr std::chrono::milliseconds kDefaultTimeout{60'000};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  void send(int peer, int tag, std::span<const std::byte> data);
  // Receives into `buffer` (resized to the message); returns its length. Throws TransportError
  // if it takes longer than timeout(), if the message is longer than max_bytes, or if a peer failed.
  std::size_t recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes);
  // Sends to send_peer and receives from recv_peer concurrently. `while_in_flight`, if given, runs
  // once both are posted and before the wait for them: work that needs neither the incoming message
  // nor a change to `data` overlaps the transfer, as with MPI_Isend/MPI_Irecv (on a simulated
  // network its compute time hides behind the message's flight). If it throws, the exchange is
  // abandoned and the exception passes through.
  std::size_t sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                       std::vector<std::byte>& buffer, std::size_t max_bytes, const InFlightWork& while_in_flight = {});
  virtual void barrier() = 0;
  // Waits until every send this rank buffered has been taken by its receiver (timeout(): a
  // TransportError naming the peer). For transports whose sends complete in the background (the
  // c10d transport): call it after a collective, before the process may end. Default: nothing.
  virtual void flush() {}

  const TrafficCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Sums `values` over all ranks with the transport's own collective if it has one (MPI_Allreduce),
  // after checking that `must_agree` is equal on every rank (throwing on every rank if not).
  // Returns false, doing nothing, if there is none: the caller then uses point-to-point messages.
  virtual bool native_allreduce_sum(std::span<float> values, std::span<const std::uint64_t> must_agree) {
    (void)values;
    (void)must_agree;
    return false;
  }

  // Seconds on the transport's clock, to time what goes through it. Default: std::steady_clock.
  // MPI: MPI_Wtime, which under SimGrid SMPI is the simulated clock, shared by every rank, so a
  // benchmark timed with it reports what the simulated cluster would take.
  virtual double clock_seconds() const;

  // Tells the other workers that this one failed, so that their waits end at once with `reason`
  // instead of a timeout. Best effort; never throws.
  virtual void abort(const std::string& reason) noexcept = 0;
  // True once another worker's failure has ended the run, where the transport can tell (in-process
  // workers); a worker busy outside the transport can poll it to stop early.
  virtual bool aborted() const { return false; }

 protected:
  virtual void do_send(int peer, int tag, std::span<const std::byte> data) = 0;
  virtual std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) = 0;
  // Default: send (buffered), the work in flight, then receive. Rendezvous transports override it.
  virtual std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer,
                                  int recv_tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                  const InFlightWork& while_in_flight);
  void check_peer(int peer, const char* what) const;
  // For transports whose collectives bypass send/recv: count what a ring would have sent.
  void count_traffic(std::uint64_t bytes_sent, std::uint64_t messages_sent, std::uint64_t bytes_received,
                     std::uint64_t messages_received) {
    counters_.bytes_sent += bytes_sent;
    counters_.messages_sent += messages_sent;
    counters_.bytes_received += bytes_received;
    counters_.messages_received += messages_received;
  }

 private:
  TrafficCounters counters_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace sparsgd::transport
