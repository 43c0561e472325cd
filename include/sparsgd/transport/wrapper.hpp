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
  Transport& inner_;
};

}  // namespace sparsgd::transport
