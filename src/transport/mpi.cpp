#include "sparsgd/transport/mpi.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

namespace sparsgd::transport {
namespace {

using clock = std::chrono::steady_clock;

// Under SimGrid SMPI (SPARSGD_SMPI) the ranks are simulated actors and the clock is the
// simulator's, so the polling of the real transport would distort what is measured: SMPI charges
// simulated time for every MPI_Test and MPI_Iprobe (configs smpi/test and smpi/iprobe, 0.1 ms a
// call, and a failing probe sleeps longer each time), the steady_clock deadline runs on the host's
// time, and sleep_for is turned into simulated sleeps by smpicxx's forced header. So there every
// wait blocks in MPI_Wait, which suspends the actor until its transfer has finished in simulated
// time and costs nothing else; a receive is posted before the matching send with a buffer of the
// largest allowed size (no probe); collectives are the blocking ones (SMPI's nonblocking
// MPI_Iallreduce sends the whole buffer to every rank, not the ring the cost model assumes). There
// is no timeout: simulated time cannot run out, and SimGrid itself reports a deadlock.
#ifdef SPARSGD_SMPI
constexpr bool kSimulated = true;
#else
constexpr bool kSimulated = false;
#endif

// Polls with a short spin, then sleeps a little between polls so that ranks sharing cores leave
// them to the ones with work.
class Poller {
 public:
  void pause() {
    if (++spins_ > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins_ > 1024 ? 200 : 20));
  }
  // Past the first spins: a wait long enough for side work (answering a census) to cost nothing.
  bool waiting_long() const { return spins_ > 64; }

 private:
  int spins_ = 0;
};

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw TransportError(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_ = true;
  }
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

MpiTransport::MpiTransport(MPI_Comm comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw TransportError("MPI is not initialized (create an MpiSession first)");
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  // Errors come back as codes and become exceptions instead of aborting inside MPI.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if constexpr (!kSimulated) {
    check(MPI_Comm_dup(comm_, &census_comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(census_comm_, MPI_ERRORS_RETURN);
  }
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Request& reply : census_replies_) {
    if (reply != MPI_REQUEST_NULL) MPI_Request_free(&reply);
  }
  if (census_comm_ != MPI_COMM_NULL) MPI_Comm_free(&census_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

namespace {
constexpr int kCensusQuery = 1;
constexpr int kCensusReply = 2;
constexpr std::chrono::milliseconds kCensusGrace{2000};

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}
}  // namespace

void MpiTransport::answer_census_queries() {
  if (census_comm_ == MPI_COMM_NULL) return;
  while (true) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kCensusQuery, census_comm_, &pending, &status) != MPI_SUCCESS || !pending) return;
    MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, kCensusQuery, census_comm_, MPI_STATUS_IGNORE);
    census_reply_values_.push_back(in_collective_);
    census_replies_.push_back(MPI_REQUEST_NULL);
    MPI_Isend(&census_reply_values_.back(), 1, MPI_UINT64_T, status.MPI_SOURCE, kCensusReply, census_comm_,
              &census_replies_.back());
  }
}

std::string MpiTransport::census(std::uint64_t collective) {
  if (census_comm_ == MPI_COMM_NULL || size_ == 1) return "";
  std::vector<std::uint64_t> where(static_cast<std::size_t>(size_), 0);
  std::vector<MPI_Request> replies(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<bool> answered(static_cast<std::size_t>(size_), false);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto ir = static_cast<std::size_t>(r);
    MPI_Irecv(&where[ir], 1, MPI_UINT64_T, r, kCensusReply, census_comm_, &replies[ir]);
    MPI_Request query = MPI_REQUEST_NULL;
    MPI_Isend(nullptr, 0, MPI_BYTE, r, kCensusQuery, census_comm_, &query);
    MPI_Request_free(&query);
  }
  const auto grace = std::min<std::chrono::milliseconds>(kCensusGrace, timeout());
  const auto deadline = clock::now() + grace;
  Poller poller;
  int missing = size_ - 1;
  while (missing > 0 && clock::now() < deadline) {
    answer_census_queries();
    for (int r = 0; r < size_; ++r) {
      const auto ir = static_cast<std::size_t>(r);
      if (r == rank_ || answered[ir]) continue;
      int done = 0;
      MPI_Test(&replies[ir], &done, MPI_STATUS_IGNORE);
      if (done) {
        answered[ir] = true;
        --missing;
      }
    }
    poller.pause();
  }
  std::vector<int> silent, with_me, elsewhere;
  std::string elsewhere_text;
  for (int r = 0; r < size_; ++r) {
    const auto ir = static_cast<std::size_t>(r);
    if (r == rank_) continue;
    if (!answered[ir]) {
      // A receive may be cancelled (only collectives may not).
      MPI_Cancel(&replies[ir]);
      MPI_Request_free(&replies[ir]);
      silent.push_back(r);
    } else if (where[ir] == collective) {
      with_me.push_back(r);
    } else {
      elsewhere.push_back(r);
      elsewhere_text += "; rank " + std::to_string(r) +
                        (where[ir] == 0 ? " waits for a point-to-point message"
                                        : " waits in another collective (#" + std::to_string(where[ir]) + ")");
    }
  }
  std::string text = " (collective #" + std::to_string(collective) + ")";
  if (!silent.empty()) {
    text += "; " + rank_list(silent) + (silent.size() == 1 ? " does" : " do") + " not answer within " +
            std::to_string(grace.count()) + " ms (busy, stuck or dead): " + (silent.size() == 1 ? "it has" : "they have") +
            " not reached it";
  }
  if (!with_me.empty()) text += "; " + rank_list(with_me) + " wait" + (with_me.size() == 1 ? "s" : "") + " in it too";
  return text + elsewhere_text;
}

void MpiTransport::wait(MPI_Request& request, const std::string& what, MPI_Status* status, Kind kind) {
  if constexpr (kSimulated) {
    check(MPI_Wait(&request, status), ("MPI_Wait " + what).c_str());
    return;
  }
  const auto deadline = clock::now() + timeout();
  Poller poller;
  int done = 0;
  const std::uint64_t collective = kind == Kind::collective ? ++collectives_entered_ : 0;
  in_collective_ = collective;
  struct Leave {
    std::uint64_t& in;
    ~Leave() { in = 0; }
  } leave{in_collective_};
  while (true) {
    if (poller.waiting_long()) answer_census_queries();
    const int code = MPI_Test(&request, &done, status);
    if (code != MPI_SUCCESS) {
      int error_class = MPI_SUCCESS;
      MPI_Error_class(code, &error_class);
      if (error_class == MPI_ERR_TRUNCATE) {
        throw TransportError("rank " + std::to_string(rank_) + ": message longer than expected " + what);
      }
      check(code, "MPI_Test");
    }
    if (done) return;
    if (clock::now() > deadline) {
      if (kind == Kind::point_to_point) MPI_Cancel(&request);
      throw TransportError("rank " + std::to_string(rank_) + ": timed out after " + std::to_string(timeout().count()) +
                           " ms " + what + (kind == Kind::collective ? census(collective) : ""));
    }
    poller.pause();
  }
}

void MpiTransport::barrier() {
  if constexpr (kSimulated) {
    check(MPI_Barrier(comm_), "MPI_Barrier");
    return;
  }
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  wait(request, "in a barrier (a rank that stopped or never arrived)", MPI_STATUS_IGNORE, Kind::collective);
}

void MpiTransport::abort(const std::string& reason) noexcept {
  std::fprintf(stderr, "sparsgd: rank %d: aborting the MPI job: %s\n", rank_, reason.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

void MpiTransport::do_send(int peer, int tag, std::span<const std::byte> data) {
  MPI_Request request;
  check(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_, &request), "MPI_Isend");
  wait(request, "sending to rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")");
}

// The receive is posted before the send. A large message goes by rendezvous: the sender waits for
// the receiver's acknowledgement, which MPI sends when a matching receive is posted. Posted late
// (after a probe), that acknowledgement can queue behind this rank's own bulk data on the
// connection both directions share, and the two halves of the exchange then run one after the
// other instead of together (seen on tbf-shaped TCP links: a ring step took twice its time).
std::size_t MpiTransport::recv_posted_first(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                            const Outgoing* also_send, const InFlightWork& while_in_flight) {
  if (max_bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw TransportError("rank " + std::to_string(rank_) + ": a message of up to " + std::to_string(max_bytes) +
                         " bytes does not fit an MPI count");
  }
  buffer.resize(max_bytes);
  MPI_Request receive;
  check(MPI_Irecv(buffer.data(), static_cast<int>(max_bytes), MPI_BYTE, peer, tag, comm_, &receive), "MPI_Irecv");
  MPI_Request send = MPI_REQUEST_NULL;
  if (also_send != nullptr) {
    const int sent = MPI_Isend(also_send->data.data(), static_cast<int>(also_send->data.size()), MPI_BYTE,
                               also_send->peer, also_send->tag, comm_, &send);
    if (sent != MPI_SUCCESS) {
      MPI_Cancel(&receive);
      MPI_Request_free(&receive);
      check(sent, "MPI_Isend");
    }
  }
  if (while_in_flight) {
    try {
      while_in_flight();
    } catch (...) {
      // The receive must not land in `buffer` later; the send, which MPI cannot take back, finishes
      // on its own (its data belongs to the caller, who is failing anyway).
      MPI_Cancel(&receive);
      MPI_Request_free(&receive);
      if (send != MPI_REQUEST_NULL) MPI_Request_free(&send);
      throw;
    }
  }
  MPI_Status status;
  wait(receive,
       "waiting for a message from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ", at most " +
           std::to_string(max_bytes) + " bytes)",
       &status);
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  buffer.resize(static_cast<std::size_t>(count));
  if (also_send != nullptr) {
    wait(send, "sending to rank " + std::to_string(also_send->peer) + " (tag " + std::to_string(also_send->tag) + ")");
  }
  return buffer.size();
}

std::size_t MpiTransport::do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  if constexpr (kSimulated) return recv_posted_first(peer, tag, buffer, max_bytes, nullptr);
  const auto deadline = clock::now() + timeout();
  Poller poller;
  MPI_Status status;
  int ready = 0;
  while (true) {
    check(MPI_Iprobe(peer, tag, comm_, &ready, &status), "MPI_Iprobe");
    if (ready) break;
    if (clock::now() > deadline) {
      throw TransportError("rank " + std::to_string(rank_) + ": timed out after " + std::to_string(timeout().count()) +
                           " ms waiting for a message from rank " + std::to_string(peer) + " (tag " +
                           std::to_string(tag) + ")");
    }
    poller.pause();
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (count < 0 || static_cast<std::size_t>(count) > max_bytes) {
    throw TransportError("rank " + std::to_string(rank_) + ": message from rank " + std::to_string(peer) + " has " +
                         std::to_string(count) + " bytes, more than the " + std::to_string(max_bytes) + " expected");
  }
  buffer.resize(static_cast<std::size_t>(count));
  // Not MPI_Recv: it would spin until the last byte is in (milliseconds for a large message on a
  // slow link), taking the core from ranks that share it and from the kernel's own network work.
  MPI_Request request;
  check(MPI_Irecv(buffer.data(), count, MPI_BYTE, peer, tag, comm_, &request), "MPI_Irecv");
  wait(request, "receiving " + std::to_string(count) + " bytes from rank " + std::to_string(peer) + " (tag " +
                    std::to_string(tag) + ")");
  return buffer.size();
}

std::size_t MpiTransport::do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer,
                                      int recv_tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                      const InFlightWork& while_in_flight) {
  const Outgoing out{send_peer, send_tag, data};
  return recv_posted_first(recv_peer, recv_tag, buffer, max_bytes, &out, while_in_flight);
}

class MpiTransport::PostedSend final : public PendingOperation {
 public:
  PostedSend(MpiTransport& t, int peer, int tag, std::span<const std::byte> data)
      : t_(t), peer_(peer), tag_(tag), bytes_(data.size()) {
    check(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, t.comm_, &request_), "MPI_Isend");
  }
  std::size_t wait() override {
    t_.wait(request_, "sending to rank " + std::to_string(peer_) + " (tag " + std::to_string(tag_) + ")");
    return bytes_;
  }
  bool test() override {
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
  // MPI cannot take a send back: it finishes on its own.
  void abandon() noexcept override {
    if (request_ != MPI_REQUEST_NULL) MPI_Request_free(&request_);
  }

 private:
  MpiTransport& t_;
  int peer_, tag_;
  std::size_t bytes_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

class MpiTransport::PostedReceive final : public PendingOperation {
 public:
  PostedReceive(MpiTransport& t, int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes)
      : t_(t), peer_(peer), tag_(tag), max_bytes_(max_bytes), buffer_(buffer) {
    if (max_bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw TransportError("rank " + std::to_string(t.rank_) + ": a message of up to " + std::to_string(max_bytes) +
                           " bytes does not fit an MPI count");
    }
    staging_ = t.take_staging(max_bytes);
    const int posted =
        MPI_Irecv(staging_.data(), static_cast<int>(max_bytes), MPI_BYTE, peer, tag, t.comm_, &request_);
    if (posted != MPI_SUCCESS) t.give_back_staging(std::move(staging_));
    check(posted, "MPI_Irecv");
  }
  ~PostedReceive() override {
    if (request_ == MPI_REQUEST_NULL && !staging_.empty()) t_.give_back_staging(std::move(staging_));
  }
  std::size_t wait() override {
    if (request_ != MPI_REQUEST_NULL) {
      t_.wait(request_,
              "waiting for a message from rank " + std::to_string(peer_) + " (tag " + std::to_string(tag_) +
                  ", at most " + std::to_string(max_bytes_) + " bytes)",
              &status_);
    }
    int count = 0;
    MPI_Get_count(&status_, MPI_BYTE, &count);
    if (!staging_.empty()) {
      buffer_.assign(staging_.begin(), staging_.begin() + count);
      t_.give_back_staging(std::move(staging_));
      staging_.clear();
    }
    return buffer_.size();
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    const int code = MPI_Test(&request_, &done, &status_);
    if (code != MPI_SUCCESS) {
      int error_class = MPI_SUCCESS;
      MPI_Error_class(code, &error_class);
      if (error_class == MPI_ERR_TRUNCATE) {
        throw TransportError("rank " + std::to_string(t_.rank_) + ": message longer than the " +
                             std::to_string(max_bytes_) + " bytes expected from rank " + std::to_string(peer_) +
                             " (tag " + std::to_string(tag_) + ")");
      }
      check(code, "MPI_Test");
    }
    return done != 0;
  }
  // A receive MPI has matched cannot be cancelled: its staging buffer is kept alive for it.
  void abandon() noexcept override {
    if (request_ == MPI_REQUEST_NULL) return;
    MPI_Cancel(&request_);
    MPI_Request_free(&request_);
    try {
      t_.abandoned_staging_.push_back(std::move(staging_));
    } catch (...) {
      (void)new std::vector<std::byte>(std::move(staging_));  // cannot fail to own it: leaked on purpose
    }
    staging_.clear();
  }

 private:
  MpiTransport& t_;
  int peer_, tag_;
  std::size_t max_bytes_;
  std::vector<std::byte>& buffer_;
  std::vector<std::byte> staging_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  MPI_Status status_{};
};

std::vector<std::byte> MpiTransport::take_staging(std::size_t bytes) {
  std::vector<std::byte> buffer;
  if (!spare_staging_.empty()) {
    buffer = std::move(spare_staging_.back());
    spare_staging_.pop_back();
  }
  // Sized once, zero-filled once: a reused buffer keeps its size, and only growth is filled. At
  // least one byte, so that a buffer in use is never empty (empty: handed back).
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  if (buffer.size() < size) buffer.resize(size);
  return buffer;
}

void MpiTransport::give_back_staging(std::vector<std::byte> buffer) {
  if (!buffer.empty()) spare_staging_.push_back(std::move(buffer));
}

std::unique_ptr<PendingOperation> MpiTransport::do_post_send(int peer, int tag, std::span<const std::byte> data) {
  return std::make_unique<PostedSend>(*this, peer, tag, data);
}

std::unique_ptr<PendingOperation> MpiTransport::do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                             std::size_t max_bytes) {
  return std::make_unique<PostedReceive>(*this, peer, tag, buffer, max_bytes);
}

bool MpiTransport::native_allreduce_sum(std::span<float> values, std::span<const std::uint64_t> must_agree) {
  auto allreduce = [this](void* data, std::size_t count, MPI_Datatype type, MPI_Op op, const std::string& what) {
    if constexpr (kSimulated) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_), "MPI_Allreduce");
    } else {
      MPI_Request request;
      check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_, &request), "MPI_Iallreduce");
      wait(request, what, MPI_STATUS_IGNORE, Kind::collective);
    }
  };
  // MPI_Allreduce with differing counts is undefined behaviour, so agree on the parameters first.
  std::vector<std::uint64_t> low(must_agree.begin(), must_agree.end()), high(low);
  allreduce(low.data(), low.size(), MPI_UINT64_T, MPI_MIN, "agreeing on the allreduce parameters");
  allreduce(high.data(), high.size(), MPI_UINT64_T, MPI_MAX, "agreeing on the allreduce parameters");
  if (low != high) {
    throw TransportError("rank " + std::to_string(rank_) +
                         ": ranks disagree on the dense allreduce's algorithm, n or k (all ranks must use the same)");
  }
  allreduce(values.data(), values.size(), MPI_FLOAT, MPI_SUM,
            "in MPI_Allreduce of " + std::to_string(values.size()) + " floats");
  // Counted as the ring allreduce would send: MPI's own algorithm choice is not visible here.
  const auto p = static_cast<std::uint64_t>(size_);
  const std::uint64_t bytes = p > 1 ? 2 * (p - 1) * values.size() * 4 / p : 0;
  count_traffic(bytes, 2 * (p - 1), bytes, 2 * (p - 1));
  return true;
}

}  // namespace sparsgd::transport
