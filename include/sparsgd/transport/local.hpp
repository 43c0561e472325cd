#pragma once
// The in-process transport: P workers as threads of one process, each with its own
// LocalTransport over a shared LocalContext. The embedded default and the workhorse of the tests.
// Sends copy into the receiver's mailbox and never block, receives match (source, tag) in order,
// so a run is deterministic whatever the thread schedule.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sparsgd/transport/buffer_pool.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::transport {

class LocalContext {
 public:
  explicit LocalContext(int size);
  int size() const { return size_; }

  void post(int source, int destination, int tag, std::vector<std::byte> data);
  // An empty buffer that holds a message of `bytes`, from the buffers that received messages have
  // given back (so that steady traffic allocates nothing), or a new one.
  std::vector<std::byte> spare_buffer(std::size_t bytes);
  // Gives a buffer back for spare_buffer() to hand out again.
  void recycle(std::vector<std::byte> buffer);
  // Waits for the oldest message from `source` with `tag` to `destination`; throws on timeout or
  // abort.
  std::vector<std::byte> take(int destination, int source, int tag, std::chrono::milliseconds timeout);
  void barrier(int rank, std::chrono::milliseconds timeout);
  // Marks the run failed; every wait in progress or to come throws with the reason.
  void abort(int rank, const std::string& reason) noexcept;
  bool aborted() const;

 private:
  struct Message {
    int source;
    int tag;
    std::vector<std::byte> data;
  };
  struct Mailbox {
    std::deque<Message> queue;
    std::condition_variable arrived;
  };
  [[noreturn]] void throw_aborted(int rank) const;
  // "rank 1, which waits for rank 3, which is not waiting for anyone": who a timed-out wait was
  // really stuck behind. Called with mutex_ held.
  std::string describe_wait_chain(int peer) const;

  int size_;
  mutable std::mutex mutex_;
  std::condition_variable barrier_changed_;
  std::vector<Mailbox> mailboxes_;
  BufferPool spare_;
  std::uint64_t barrier_generation_ = 0;
  int barrier_waiting_ = 0;
  std::vector<int> waiting_for_;  // per rank: the peer its receive waits for, or -1
  bool aborted_ = false;
  int aborted_by_ = -1;
  std::string abort_reason_;
};

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<LocalContext> context, int rank);
  int rank() const override { return rank_; }
  int size() const override { return context_->size(); }
  void barrier() override;
  void abort(const std::string& reason) noexcept override;
  bool aborted() const override { return context_->aborted(); }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override;
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override;

 private:
  std::shared_ptr<LocalContext> context_;
  int rank_;
};

// Runs body(transport) on `workers` threads, one LocalTransport each. If a worker throws, the
// context is aborted so the others stop at their next wait, and after all threads have joined the
// lowest-ranked worker's own error (not a PeerFailed it caused elsewhere) is rethrown, naming its
// rank. `timeout` applies to every wait.
void run_local_workers(int workers, const std::function<void(Transport&)>& body,
                       std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace sparsgd::transport
