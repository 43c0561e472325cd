#pragma once
// The Transport interface on a torch.distributed (c10d) ProcessGroup, so that a job that called
// torch.distributed.init_process_group needs nothing else: no mpirun, no second engine. It works
// with process groups that move CPU tensors point to point (gloo; MPI where torch was built with
// it); a NCCL group is refused with a message saying to create a gloo group beside it.
//
// A message is two c10d messages on the pair: its length (one int64), then its bytes (if any), on
// tags 2t and 2t + 1, so the receiver knows the size before it posts the receive and can refuse a
// message longer than it expects before reading it. Sends are buffered (gloo's own sends wait for
// the matching receive): the bytes are copied and the send completes in the background, checked at
// the next call. Every wait has the transport's timeout and a failure names the peer and what was
// awaited, never a hang. A timed-out wait is fatal to the group (gloo closes the pair). The ProcessGroup's own collectives
// (barrier, allreduce for the dense aggregator) are used where they exist.

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>
#include <vector>

#include "sparsgd/transport/transport.hpp"

namespace c10d {
class ProcessGroup;
}

namespace sparsgd::torch_layer {

class ProcessGroupTransport final : public transport::Transport {
 public:
  // Throws InvalidArgument for a null group or one whose backend cannot move CPU tensors.
  explicit ProcessGroupTransport(c10::intrusive_ptr<c10d::ProcessGroup> group);
  ~ProcessGroupTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  bool native_allreduce_sum(std::span<float> values, std::span<const std::uint64_t> must_agree) override;
  // c10d cannot end another process's wait; a peer that exits closes its connections, which ends
  // the others' waits with an error naming it.
  void abort(const std::string& reason) noexcept override { (void)reason; }
  const std::string& backend() const { return backend_; }

 protected:
  void do_send(int peer, int tag, std::span<const std::byte> data) override;
  std::size_t do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) override;
  std::size_t do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer, int recv_tag,
                          std::vector<std::byte>& buffer, std::size_t max_bytes,
                          const transport::InFlightWork& while_in_flight) override;

 public:
  struct PostedOp;  // defined in the .cpp

 private:
  // Throws the first failure among the sends posted earlier and forgets those that completed.
  void reap_sends();
  std::vector<std::unique_ptr<PostedOp>> post_send(int peer, int tag, std::span<const std::byte> data);

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::vector<std::unique_ptr<PostedOp>> pending_sends_;
  std::string backend_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace sparsgd::torch_layer
