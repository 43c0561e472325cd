#pragma once
// Error feedback: what a worker did not get into the aggregated sum stays in its residual and
// joins its next gradient.
//   acc = gradient + residual;  after aggregation  residual = acc - consumed part of acc.
// The residual buffer holds acc between accumulate() and commit(), so one buffer serves both and
// no n-sized copy is made.
// Switched off (the baseline that shows what the memory buys, and the mode of unbiased
// compressors), acc = gradient: what was not consumed is still the residual after commit(), so
// that conservation can be checked the same way, and is dropped by the next accumulate().

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::compress {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::size_t n, bool enabled = true);

  std::size_t size() const { return buffer_.size(); }
  bool enabled() const { return enabled_; }

  // acc = gradient + residual (switched off: acc = gradient). Returns acc, valid until commit().
  // Throws InvalidArgument if the gradient's length differs or a previous accumulate() was not
  // committed.
  std::span<const float> accumulate(std::span<const float> gradient);

  // The aggregation consumed every entry of `sent` (its values are inside the final sum).
  void commit(const SparseVector& sent);
  // consumed[i] != 0 says entry i of `sent` is inside the final sum; the others stay in the
  // residual. This is how an aggregator reports exactly what it consumed.
  void commit(const SparseVector& sent, std::span<const std::uint8_t> consumed);
  // The aggregation consumed all of acc (dense exchange).
  void commit_dense();

  // The residual; while an accumulate() is pending, acc.
  std::span<const float> residual() const { return buffer_; }
  // Replaces the residual (restoring a checkpoint). Throws on a length mismatch.
  void set_residual(std::span<const float> residual);
  bool pending() const { return pending_; }

 private:
  void check_sent(const SparseVector& sent) const;
  std::vector<float> buffer_;
  bool enabled_;
  bool pending_ = false;
};

}  // namespace sparsgd::compress
