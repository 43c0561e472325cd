#pragma once
// The MPI transport (Open MPI; MPICH works too): one worker per rank, for clusters. It can use
// MPI_COMM_WORLD or a communicator a C++ user hands it (it works on a duplicate, so its messages
// never mix with the user's). Every wait polls with a deadline, so a silent peer is a
// TransportError naming it, never a hang.
//
// Built for SimGrid SMPI (SPARSGD_SMPI), every wait blocks in MPI_Wait instead: see mpi.cpp.

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "sparsgd/transport/transport.hpp"

namespace sparsgd::transport {

// Initializes MPI (if nobody has) for the lifetime of the object and finalizes it at the end.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  // MPI has no way to tell the others and carry on: this ends the whole job (MPI_Abort).
  void abort(const std::string& reason) noexcept override;
  bool native_allreduce_sum(std::span<float> values, std::span<const std::uint64_t> must_agree) override;
  double clock_seconds() const override { return MPI_Wtime(); }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override;
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override;
  std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                          std::vector<std::byte>& buffer, std::size_t max_bytes,
                          const InFlightWork& while_in_flight) override;
  // MPI_Isend and MPI_Irecv (into a staging buffer), waited for as every MPI request here
  // (timeout, census).
  std::unique_ptr<PendingOperation> do_post_send(int peer, int tag, std::span<const std::byte> data) override;
  std::unique_ptr<PendingOperation> do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                 std::size_t max_bytes) override;

 private:
  class PostedSend;
  class PostedReceive;
  // Polls `request` to completion (its status into `status`, if given); throws on error or timeout.
  // A timed-out point-to-point request is cancelled; a collective one (barrier, allreduce) is left
  // as it is, since cancelling it is erroneous in MPI and makes Open MPI abort the job itself,
  // without our message.
  enum class Kind { point_to_point, collective };
  void wait(MPI_Request& request, const std::string& what, MPI_Status* status = MPI_STATUS_IGNORE,
            Kind kind = Kind::point_to_point);
  // Posts the receive (into max_bytes), then the optional send, runs the work in flight, and waits
  // for both: sendrecv, and under SMPI every receive (no probe there: it would cost simulated time).
  struct Outgoing {
    int peer;
    int tag;
    std::span<const std::byte> data;
  };
  std::size_t recv_posted_first(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                const Outgoing* also_send, const InFlightWork& while_in_flight = {});
  // A timed-out collective cannot say which rank never came (MPI does not tell). So every wait
  // answers census queries on a second communicator, and a rank whose collective timed out asks
  // every other rank where it is: the ranks waiting in the same collective answer at once; the
  // ones that do not answer are named as the stopped ones.
  void answer_census_queries();
  std::string census(std::uint64_t collective);
  MPI_Comm census_comm_ = MPI_COMM_NULL;
  std::uint64_t collectives_entered_ = 0;  // the same sequence on every rank of a healthy run
  std::uint64_t in_collective_ = 0;        // the one being waited on now (0: none)
  std::vector<MPI_Request> census_replies_;
  std::deque<std::uint64_t> census_reply_values_;  // Isend buffers: a deque never moves them

  // Posted receives land in staging buffers of their largest allowed size, kept here and reused,
  // and the message is copied out at the end: posting into the caller's buffer would resize it to
  // that size every time, zero-filling what the last, shorter message left (Ok-Topk posts P - 1
  // receives of up to a region each: at P = 1024, 20 MB of zeros a call). A buffer whose receive
  // was abandoned may still be written by MPI, so it stays alive, never reused.
  std::vector<std::byte> take_staging(std::size_t bytes);
  void give_back_staging(std::vector<std::byte> buffer);
  std::vector<std::vector<std::byte>> spare_staging_;
  std::vector<std::vector<std::byte>> abandoned_staging_;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace sparsgd::transport
