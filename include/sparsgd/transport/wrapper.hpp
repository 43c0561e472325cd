#pragma once
// A transport layered on another one (the simulated network, a benchmark's point-to-point-only
// view): who it is, how it fails and what time it is are the inner transport's. Deriving from
// this keeps every such layer forwarding them, including ones added to Transport later; how the
// layer moves messages stays its own.

#include "sparsgd/transport/transport.hpp"

namespace sparsgd::transport {

class TransportWrapper : public Transport {
 public:
  explicit TransportWrapper(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void abort(const std::string& reason) noexcept override { inner_.abort(reason); }
  bool aborted() const override { return inner_.aborted(); }
  double clock_seconds() const override { return inner_.clock_seconds(); }
  void flush() override { inner_.flush(); }
  Transport& inner() { return inner_; }

 protected:
  // Posted operations go to the inner transport unchanged (a layer that changes messages, such as
  // the simulated network, overrides these).
  std::unique_ptr<PendingOperation> do_post_send(int peer, int tag, std::span<const std::byte> data) override {
    inner_.set_timeout(timeout());
    return std::make_unique<InnerRequest>(inner_.post_send(peer, tag, data));
  }
  std::unique_ptr<PendingOperation> do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                 std::size_t max_bytes) override {
    inner_.set_timeout(timeout());
    return std::make_unique<InnerRequest>(inner_.post_recv(peer, tag, buffer, max_bytes));
  }

  // A request of the inner transport as this layer's pending operation.
  class InnerRequest final : public PendingOperation {
   public:
    explicit InnerRequest(Request request) : request_(std::move(request)) {}
    std::size_t wait() override { return request_.pending() ? request_.wait() : request_.bytes(); }
    bool test() override { return request_.test(); }
    void abandon() noexcept override { request_ = Request(); }

   private:
    Request request_;
  };

  Transport& inner_;
};

}  // namespace sparsgd::transport
