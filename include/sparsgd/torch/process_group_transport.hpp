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

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sparsgd/transport/transport.hpp"

namespace c10d {
class ProcessGroup;
class Store;
class Work;
}

namespace sparsgd::torch_layer {

class ProcessGroupTransport final : public transport::Transport {
 public:
  // Throws InvalidArgument for a null group or one whose backend cannot move CPU tensors.
  // `store` (optional: the group's c10d Store, under a prefix of its own per transport) records
  // each rank's failure, so that a rank whose peer ended names the rank that ended first: "rank 1:
  // failed waiting for a message from rank 3 ...; rank 3 had lost rank 2, which ended first without
  // an error of its own (killed or exited)".
  explicit ProcessGroupTransport(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                 c10::intrusive_ptr<c10d::Store> store = {}, std::string store_prefix = "sparsgd");
  // Flushes the sends still in flight (within the timeout, best effort: never throws).
  ~ProcessGroupTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void flush() override;
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
  std::unique_ptr<PostedOp> post(std::string what, int peer, std::vector<at::Tensor> tensors,
                                 const std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>& start);
  void wait_for(std::unique_ptr<PostedOp>& op, std::chrono::milliseconds timeout);
  [[noreturn]] void fail(const std::string& what, int peer, const std::string& reason);
  // What the store says about why `peer` ended: the chain of recorded failures up to the first rank.
  std::string explain_lost_peer(int peer) const;
  // Throws the first failure among the sends posted earlier and forgets those that completed.
  void reap_sends();
  std::vector<std::unique_ptr<PostedOp>> post_send(int peer, int tag, std::span<const std::byte> data);

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string store_prefix_;
  std::vector<std::unique_ptr<PostedOp>> pending_sends_;
  std::string backend_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace sparsgd::torch_layer
