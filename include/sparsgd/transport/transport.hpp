#pragma once
// The narrow interface every collective is written against (layer 4 of docs/DESIGN.md): rank, size,
// point-to-point messages of bytes with a tag, barrier, and traffic counters.
//
// Matching: recv(peer, tag) takes the oldest unreceived message that `peer` sent to this rank with
// `tag`. Sends may be buffered; pairwise exchanges must use sendrecv, or post their receives and
// sends (post_recv, post_send) before waiting, so that transports with rendezvous sends (MPI for
// large messages) cannot deadlock.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
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

class Transport;

// What a transport does for one posted send or receive (Transport::do_post_send, do_post_recv).
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  // Blocks until the operation is done (at most the transport's timeout(): TransportError) and
  // returns the bytes it moved.
  virtual std::size_t wait() = 0;
  // Whether wait() would return at once. Default: false (a transport whose operations progress
  // only inside wait()).
  virtual bool test() { return false; }
  // The request was dropped unfinished (an exception passing through): a receive must no longer
  // land in its buffer; a send may finish on its own. Never throws.
  virtual void abandon() noexcept {}
};

// A posted send or receive: wait() (or a test() that says true) finishes it; only then is it
// counted in the transport's counters. Move-only. Destroyed while pending, it is abandoned.
// The transport must outlive it; a send's data and a receive's buffer must stay alive and
// untouched until it is finished.
class Request {
 public:
  Request() = default;
  Request(Request&& other) noexcept { *this = std::move(other); }
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  bool pending() const { return op_ != nullptr; }
  // Blocks until done; returns the bytes sent or received. Throws TransportError as send and recv
  // would (a timeout, a message longer than the receive allows, a failed peer), and if nothing is
  // pending.
  std::size_t wait();
  // True once done (and then finished and counted as by wait()); never blocks.
  bool test();
  // The bytes the finished operation moved.
  std::size_t bytes() const { return bytes_; }

 private:
  friend class Transport;
  Request(Transport& owner, std::unique_ptr<PendingOperation> op, bool is_send)
      : owner_(&owner), op_(std::move(op)), is_send_(is_send) {}
  void finish(std::size_t bytes);
  Transport* owner_ = nullptr;
  std::unique_ptr<PendingOperation> op_;
  bool is_send_ = false;
  std::size_t bytes_ = 0;
};

// Waits for every request in turn; the first failure is thrown after the others were abandoned.
void wait_all(std::span<Request> requests);

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
  // Non-blocking point-to-point: post, then wait (or test) the request. Messages match as for send
  // and recv, in the order the receives were posted. Where a transport has no native
  // non-blocking calls, the defaults stand in: a posted send is a send (it returns once the
  // transport has the data: immediately where sends are buffered), and a posted receive is a recv
  // run when it is waited for; receives for the same peer and tag must then be waited for in the
  // order they were posted (TransportError otherwise).
  Request post_send(int peer, int tag, std::span<const std::byte> data);
  Request post_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes);

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
  virtual std::unique_ptr<PendingOperation> do_post_send(int peer, int tag, std::span<const std::byte> data);
  virtual std::unique_ptr<PendingOperation> do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                         std::size_t max_bytes);
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
  friend class Request;
  class DeferredReceive;
  TrafficCounters counters_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
  // The default posted receives, per (peer, tag): how many were posted, which one is next to be
  // received, and which were abandoned (they take no message, as a cancelled MPI receive).
  struct ReceiveOrder {
    std::uint64_t posted = 0;
    std::uint64_t next = 0;
    std::set<std::uint64_t> abandoned;
  };
  std::map<std::pair<int, int>, ReceiveOrder> receive_order_;
};

}  // namespace sparsgd::transport
