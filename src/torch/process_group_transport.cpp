#include "sparsgd/torch/process_group_transport.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>

namespace sparsgd::torch_layer {

// A posted operation, the tensors it reads or writes and what it is for (in errors). The tensors
// are the transport's own, not the caller's memory: an operation abandoned after a timeout may
// still complete later.
struct ProcessGroupTransport::PostedOp {
  c10::intrusive_ptr<c10d::Work> work;
  std::vector<at::Tensor> tensors;
  std::string what;
  int peer = -1;  // -1: a collective
};

namespace {

using PostedOp = ProcessGroupTransport::PostedOp;

// The first line of an exception's message: c10 appends a C++ backtrace after it.
std::string first_line(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

// Operations that timed out or failed, kept alive until the process ends: c10d may still write
// into their tensors. Shared by every transport of the process (workers may be threads).
void abandon(std::unique_ptr<PostedOp> op) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<PostedOp>> ops;
  const std::lock_guard lock(mutex);
  ops.push_back(std::move(op));
}

void check_tag(int tag) {
  if (tag < 0 || tag > INT_MAX / 2 - 1) {
    throw transport::TransportError("message tag " + std::to_string(tag) + " is outside [0, " +
                                    std::to_string(INT_MAX / 2 - 1) + "]");
  }
}

std::string tagged(const std::string& what, int peer, int tag) {
  return what + " rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
}

}  // namespace

ProcessGroupTransport::ProcessGroupTransport(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                             c10::intrusive_ptr<c10d::Store> store, std::string store_prefix)
    : group_(std::move(group)), store_(std::move(store)), store_prefix_(std::move(store_prefix)) {
  if (!group_) throw InvalidArgument("no process group (call torch.distributed.init_process_group first)");
  backend_ = group_->getBackendName();
  if (backend_ == "nccl" || backend_ == "ucc") {
    throw InvalidArgument("process group backend '" + backend_ +
                          "' moves GPU tensors; sparsgd exchanges CPU buffers: create a gloo group for it, "
                          "torch.distributed.new_group(backend='gloo')");
  }
  rank_ = group_->getRank();
  size_ = group_->getSize();
}

ProcessGroupTransport::~ProcessGroupTransport() {
  try {
    flush();
  } catch (const std::exception&) {
    // A peer that is gone cannot take them; the error was or will be reported where it matters.
  }
  for (auto& op : pending_sends_) {
    if (op) abandon(std::move(op));
  }
}

void ProcessGroupTransport::flush() {
  for (auto& op : pending_sends_) {
    if (op) wait_for(op, timeout());
  }
  pending_sends_.clear();
}

std::unique_ptr<PostedOp> ProcessGroupTransport::post(
    std::string what, int peer, std::vector<at::Tensor> tensors,
    const std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>& start) {
  auto op = std::make_unique<PostedOp>(PostedOp{{}, std::move(tensors), std::move(what), peer});
  try {
    op->work = start(op->tensors);  // c10d throws at once when the connection to the peer is gone
  } catch (const std::exception& e) {
    fail(op->what, peer, first_line(e));
  }
  return op;
}

// Waits for `op` within `timeout`; a timeout or an error becomes a TransportError naming what it
// was for, and the operation is abandoned.
void ProcessGroupTransport::wait_for(std::unique_ptr<PostedOp>& op, std::chrono::milliseconds timeout) {
  std::string reason;
  try {
    if (op->work->wait(timeout)) return;
    reason = "the operation was aborted";
  } catch (const std::exception& e) {
    reason = first_line(e);
  }
  const std::string what = op->what;
  const int peer = op->peer;
  abandon(std::move(op));
  fail(what, peer, reason);
}

std::string ProcessGroupTransport::explain_lost_peer(int peer) const {
  if (!store_ || peer < 0) return {};
  std::string chain;
  std::vector<bool> seen(static_cast<std::size_t>(size_), false);
  try {
    for (int at = peer; at >= 0 && at < size_ && !seen[static_cast<std::size_t>(at)];) {
      seen[static_cast<std::size_t>(at)] = true;
      const std::string key = store_prefix_ + "/failed/" + std::to_string(at);
      if (!store_->check({key})) {
        chain += "; rank " + std::to_string(at) + (at == peer ? " ended" : " ended first") +
                 " without recording a communication failure (it was killed, exited, or stopped on an error of its own)";
        break;
      }
      const auto record = store_->get(key);  // "LOST_PEER MESSAGE"
      const std::string text(record.begin(), record.end());
      if (at == peer) chain += "; rank " + std::to_string(at) + " had failed before: " + text.substr(text.find(' ') + 1);
      at = std::atoi(text.c_str());
    }
  } catch (const std::exception&) {
    // The store went with the rank that served it: say what this rank knows.
  }
  return chain;
}

void ProcessGroupTransport::fail(const std::string& what, int peer, const std::string& reason) {
  const bool timed_out = reason.find("imed out") != std::string::npos || reason.find("imeout") != std::string::npos;
  const std::string message = "rank " + std::to_string(rank_) +
                              (timed_out ? ": timed out after " + std::to_string(timeout().count()) + " ms " + what +
                                               " (" + reason + ")"
                                         : ": failed " + what + ": " + reason);
  const std::string explained = message + explain_lost_peer(peer);
  if (store_) {
    try {
      const std::string record = std::to_string(peer) + " " + message;
      store_->set(store_prefix_ + "/failed/" + std::to_string(rank_), std::vector<std::uint8_t>(record.begin(), record.end()));
    } catch (const std::exception&) {
      // Best effort: the others then see this rank end without a record.
    }
  }
  if (timed_out) throw transport::TransportError(explained);
  throw transport::PeerFailed(explained);
}

void ProcessGroupTransport::reap_sends() {
  std::erase_if(pending_sends_, [](const auto& op) { return op == nullptr; });
  for (auto& op : pending_sends_) {
    if (op->work->isCompleted()) wait_for(op, std::chrono::milliseconds(0));  // throws if it failed
  }
  std::erase_if(pending_sends_, [](const auto& op) { return op == nullptr || op->work->isCompleted(); });
}

std::vector<std::unique_ptr<PostedOp>> ProcessGroupTransport::post_send(int peer, int tag,
                                                                        std::span<const std::byte> data) {
  check_tag(tag);
  reap_sends();
  const std::string what = tagged("sending to", peer, tag);
  std::vector<std::unique_ptr<PostedOp>> ops;
  ops.push_back(post(what, peer, {torch::tensor({static_cast<std::int64_t>(data.size())}, torch::kInt64)},
                     [&](auto& tensors) { return group_->send(tensors, peer, 2 * tag); }));
  if (!data.empty()) {
    at::Tensor payload = torch::empty({static_cast<std::int64_t>(data.size())}, torch::kUInt8);
    std::memcpy(payload.data_ptr(), data.data(), data.size());
    ops.push_back(post(what, peer, {payload},
                       [&](auto& tensors) { return group_->send(tensors, peer, 2 * tag + 1); }));
  }
  return ops;
}

void ProcessGroupTransport::do_send(int peer, int tag, std::span<const std::byte> data) {
  for (auto& op : post_send(peer, tag, data)) pending_sends_.push_back(std::move(op));
}

std::size_t ProcessGroupTransport::do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  check_tag(tag);
  reap_sends();
  const std::string what = tagged("waiting for a message from", peer, tag);
  auto length = post(what, peer, {torch::empty({1}, torch::kInt64)},
                     [&](auto& tensors) { return group_->recv(tensors, peer, 2 * tag); });
  wait_for(length, timeout());
  const std::int64_t bytes = length->tensors[0].item<std::int64_t>();
  if (bytes < 0 || static_cast<std::uint64_t>(bytes) > max_bytes) {
    throw transport::TransportError("rank " + std::to_string(rank_) + ": a message of " + std::to_string(bytes) +
                                    " bytes from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) +
                                    ") is longer than the at most " + std::to_string(max_bytes) + " expected");
  }
  buffer.resize(static_cast<std::size_t>(bytes));
  if (bytes == 0) return 0;
  auto payload = post(what, peer, {torch::empty({bytes}, torch::kUInt8)},
                      [&](auto& tensors) { return group_->recv(tensors, peer, 2 * tag + 1); });
  wait_for(payload, timeout());
  std::memcpy(buffer.data(), payload->tensors[0].data_ptr(), buffer.size());
  return buffer.size();
}

std::size_t ProcessGroupTransport::do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data,
                                               int recv_peer, int recv_tag, std::vector<std::byte>& buffer,
                                               std::size_t max_bytes, const transport::InFlightWork& while_in_flight) {
  do_send(send_peer, send_tag, data);
  if (while_in_flight) while_in_flight();
  return do_recv(recv_peer, recv_tag, buffer, max_bytes);
}

void ProcessGroupTransport::barrier() {
  reap_sends();
  // A one-element allreduce rather than the group's barrier(): torch 2.11's ProcessGroup::barrier
  // corrupts the heap now and then when several groups in one process run it at once (seen from
  // plain Python with gloo groups on threads), and every rank leaves an allreduce only once all
  // have entered it, which is all a barrier promises.
  auto op = post("in a barrier of " + std::to_string(size_) + " ranks (some rank did not reach it)", -1,
                 {torch::zeros({1}, torch::kInt32)}, [&](auto& tensors) { return group_->allreduce(tensors); });
  wait_for(op, timeout());
}

bool ProcessGroupTransport::native_allreduce_sum(std::span<float> values, std::span<const std::uint64_t> must_agree) {
  reap_sends();
  auto allreduce = [&](const at::Tensor& tensor, c10d::ReduceOp op, const std::string& what) {
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    auto posted = post(what, -1, {tensor}, [&](auto& tensors) { return group_->allreduce(tensors, options); });
    wait_for(posted, timeout());
    return posted->tensors[0];
  };
  // An allreduce of differing lengths would hang or fail obscurely: agree on the parameters first,
  // by the minimum and the maximum of each (equal everywhere iff they are equal).
  at::Tensor agree = torch::empty({static_cast<std::int64_t>(must_agree.size())}, torch::kInt64);
  std::memcpy(agree.data_ptr(), must_agree.data(), must_agree.size_bytes());
  const std::string agreeing = "agreeing on the dense allreduce's parameters with " + std::to_string(size_) + " ranks";
  const at::Tensor low = allreduce(agree.clone(), c10d::ReduceOp::MIN, agreeing);
  const at::Tensor high = allreduce(agree.clone(), c10d::ReduceOp::MAX, agreeing);
  if (!torch::equal(low, high)) {
    throw transport::TransportError("rank " + std::to_string(rank_) +
                                    ": ranks disagree on the dense allreduce's algorithm, n or k (all ranks must use the same)");
  }
  at::Tensor sum = torch::empty({static_cast<std::int64_t>(values.size())}, torch::kFloat32);
  std::memcpy(sum.data_ptr(), values.data(), values.size_bytes());
  sum = allreduce(sum, c10d::ReduceOp::SUM, "in an allreduce of " + std::to_string(values.size()) + " floats");
  std::memcpy(values.data(), sum.data_ptr(), values.size_bytes());
  // Counted as the ring allreduce would send: the group's own algorithm is not visible here.
  const auto p = static_cast<std::uint64_t>(size_);
  const std::uint64_t bytes = p > 1 ? 2 * (p - 1) * values.size() * 4 / p : 0;
  count_traffic(bytes, 2 * (p - 1), bytes, 2 * (p - 1));
  return true;
}

}  // namespace sparsgd::torch_layer
