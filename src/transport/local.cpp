#include "sparsgd/transport/local.hpp"

#include <algorithm>
#include <thread>

#include "sparsgd/core/stop_request.hpp"

namespace sparsgd::transport {

namespace {

// Takes between the pool's trims: many exchanges' worth (an exchange sends from P log P to about P^2
// messages), so that only buffers idle for a long while are freed.
std::uint64_t pool_epoch_takes(int size) {
  const auto p = static_cast<std::uint64_t>(std::max(size, 1));
  return 4096 + 16 * p * p;
}

}  // namespace

LocalContext::LocalContext(int size)
    : size_(size), mailboxes_(static_cast<std::size_t>(std::max(size, 0))), spare_(pool_epoch_takes(size)) {
  SPARSGD_ENFORCE(size >= 1, "worker count must be at least 1, got " << size);
  waiting_for_.assign(static_cast<std::size_t>(size), -1);
}

std::string LocalContext::describe_wait_chain(int peer) const {
  std::string chain = "rank " + std::to_string(peer);
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(size_), 0);
  for (int at = peer; !seen[static_cast<std::size_t>(at)];) {
    seen[static_cast<std::size_t>(at)] = 1;
    const int next = waiting_for_[static_cast<std::size_t>(at)];
    if (next < 0) return chain + ", which is not waiting for a message (busy, stuck or dead)";
    chain += ", which waits for rank " + std::to_string(next);
    at = next;
  }
  return chain + " (a cycle: the ranks wait for each other)";
}

void LocalContext::post(int source, int destination, int tag, std::vector<std::byte> data) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) throw_aborted(source);
    mailboxes_[static_cast<std::size_t>(destination)].queue.push_back({source, tag, std::move(data)});
  }
  mailboxes_[static_cast<std::size_t>(destination)].arrived.notify_one();
}

std::vector<std::byte> LocalContext::spare_buffer(std::size_t bytes) {
  std::vector<std::vector<std::byte>> released;  // freed after the lock, not under it
  std::lock_guard lock(mutex_);
  return spare_.take(bytes, released);
}

void LocalContext::recycle(std::vector<std::byte> buffer) {
  if (buffer.capacity() == 0) return;
  std::lock_guard lock(mutex_);
  spare_.give(std::move(buffer));
}

void LocalContext::throw_aborted(int rank) const {
  throw PeerFailed("rank " + std::to_string(rank) + ": stopped because rank " + std::to_string(aborted_by_) +
                       " failed: " + abort_reason_);
}

std::vector<std::byte> LocalContext::take(int destination, int source, int tag, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  Mailbox& mailbox = mailboxes_[static_cast<std::size_t>(destination)];
  auto& queue = mailbox.queue;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Cleared on every way out, returns and throws alike.
  struct Waiting {
    std::vector<int>& waiting_for;
    std::size_t rank;
    ~Waiting() { waiting_for[rank] = -1; }
  } waiting{waiting_for_, static_cast<std::size_t>(destination)};
  waiting_for_[static_cast<std::size_t>(destination)] = source;
  while (true) {
    if (aborted_) throw_aborted(destination);
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->source == source && it->tag == tag) {
        std::vector<std::byte> data = std::move(it->data);
        queue.erase(it);
        return data;
      }
    }
    if (mailbox.arrived.wait_until(lock, deadline) == std::cv_status::timeout) {
      // One last look: the message may have arrived with the timeout.
      for (auto it = queue.begin(); it != queue.end(); ++it) {
        if (it->source == source && it->tag == tag) {
          std::vector<std::byte> data = std::move(it->data);
          queue.erase(it);
            return data;
        }
      }
      throw TransportError("rank " + std::to_string(destination) + ": timed out after " +
                           std::to_string(timeout.count()) + " ms waiting for a message (tag " + std::to_string(tag) +
                           ") from " + describe_wait_chain(source));
    }
  }
}

void LocalContext::barrier(int rank, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw_aborted(rank);
  const std::uint64_t generation = barrier_generation_;
  if (++barrier_waiting_ == size_) {
    barrier_waiting_ = 0;
    ++barrier_generation_;
    barrier_changed_.notify_all();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (barrier_generation_ == generation) {
    if (aborted_) throw_aborted(rank);
    if (barrier_changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        barrier_generation_ == generation) {
      throw TransportError("rank " + std::to_string(rank) + ": timed out after " + std::to_string(timeout.count()) +
                           " ms in a barrier (" + std::to_string(barrier_waiting_) + " of " +
                           std::to_string(size_) + " workers arrived)");
    }
  }
}

void LocalContext::abort(int rank, const std::string& reason) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    aborted_by_ = rank;
    abort_reason_ = reason;
  }
  for (Mailbox& mailbox : mailboxes_) mailbox.arrived.notify_all();
  barrier_changed_.notify_all();
}

bool LocalContext::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

LocalTransport::LocalTransport(std::shared_ptr<LocalContext> context, int rank)
    : context_(std::move(context)), rank_(rank) {
  SPARSGD_ENFORCE(rank >= 0 && rank < context_->size(), "rank out of range");
}

void LocalTransport::barrier() { context_->barrier(rank_, timeout()); }

void LocalTransport::abort(const std::string& reason) noexcept { context_->abort(rank_, reason); }

void LocalTransport::do_send(int peer, int tag, std::span<const std::byte> data) {
  // The copy is made outside the lock, into a recycled buffer: fresh 100 KB+ allocations would
  // come from the kernel as zeroed pages every time.
  std::vector<std::byte> copy = context_->spare_buffer(data.size());
  copy.assign(data.begin(), data.end());
  context_->post(rank_, peer, tag, std::move(copy));
}

std::size_t LocalTransport::do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  std::vector<std::byte> data = context_->take(rank_, peer, tag, timeout());
  if (data.size() > max_bytes) {
    throw TransportError("rank " + std::to_string(rank_) + ": message from rank " + std::to_string(peer) + " has " +
                         std::to_string(data.size()) + " bytes, more than the " + std::to_string(max_bytes) +
                         " expected");
  }
  buffer.swap(data);
  context_->recycle(std::move(data));  // the caller's previous buffer
  return buffer.size();
}

void run_local_workers(int workers, const std::function<void(Transport&)>& body, std::chrono::milliseconds timeout) {
  auto context = std::make_shared<LocalContext>(workers);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  // One byte per worker, not vector<bool>: its bits share words, so concurrent writes would race.
  std::vector<std::uint8_t> caused_by_abort(static_cast<std::size_t>(workers), 0);  // ended by another's failure
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(workers));
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      LocalTransport transport(context, r);
      transport.set_timeout(timeout);
      try {
        body(transport);
      } catch (const PeerFailed&) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        caused_by_abort[static_cast<std::size_t>(r)] = 1;
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        context->abort(r, e.what());
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        context->abort(r, "unknown error");
      }
    });
  }
  for (auto& t : threads) t.join();
  // Report the root cause: the lowest-ranked worker's own error (not a PeerFailed that another's
  // failure caused), so that the report does not depend on which failure came first.
  for (int pass = 0; pass < 2; ++pass) {
    for (int r = 0; r < workers; ++r) {
      const auto& error = errors[static_cast<std::size_t>(r)];
      if (!error || (pass == 0 && caused_by_abort[static_cast<std::size_t>(r)])) continue;
      try {
        std::rethrow_exception(error);
      } catch (const TransportError&) {
        throw;
      } catch (const Interrupted&) {
        throw;  // a stop the user asked for, said as it is
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("worker " + std::to_string(r) + ": " + e.what());
      } catch (const InvalidData& e) {
        throw InvalidData("worker " + std::to_string(r) + ": " + e.what());
      } catch (const std::exception& e) {
        throw TransportError("worker " + std::to_string(r) + " failed: " + e.what());
      } catch (...) {
        throw TransportError("worker " + std::to_string(r) + " failed with an unknown error");
      }
    }
  }
}

}  // namespace sparsgd::transport
