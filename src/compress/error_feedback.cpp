#include "sparsgd/compress/error_feedback.hpp"

#include <algorithm>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::compress {

ErrorFeedback::ErrorFeedback(std::size_t n, bool enabled) : buffer_(n, 0.0f), enabled_(enabled) { validate_length(n); }

std::span<const float> ErrorFeedback::accumulate(std::span<const float> gradient) {
  SPARSGD_ENFORCE_EQ(gradient.size(), buffer_.size(), "gradient length differs from the residual's");
  SPARSGD_ENFORCE(!pending_, "accumulate() called twice without commit()");
  float* acc = buffer_.data();
  const float* g = gradient.data();
  const std::size_t n = buffer_.size();
  if (enabled_) {
    for (std::size_t i = 0; i < n; ++i) acc[i] += g[i];
  } else {
    std::copy(g, g + n, acc);
  }
  pending_ = true;
  return buffer_;
}

void ErrorFeedback::check_sent(const SparseVector& sent) const {
  SPARSGD_ENFORCE(pending_, "commit() without a pending accumulate()");
  SPARSGD_ENFORCE_EQ(sent.indices.size(), sent.values.size(), "sparse vector has mismatched arrays");
  for (const std::uint32_t index : sent.indices) {
    SPARSGD_ENFORCE_LT(static_cast<std::size_t>(index), buffer_.size(), "sent index out of range");
  }
}

void ErrorFeedback::commit(const SparseVector& sent) {
  check_sent(sent);
  for (const std::uint32_t index : sent.indices) buffer_[index] = 0.0f;
  pending_ = false;
}

void ErrorFeedback::commit(const SparseVector& sent, std::span<const std::uint8_t> consumed) {
  check_sent(sent);
  SPARSGD_ENFORCE_EQ(consumed.size(), sent.size(), "consumed flags must match the sent entries");
  for (std::size_t i = 0; i < consumed.size(); ++i) {
    if (consumed[i] != 0) buffer_[sent.indices[i]] = 0.0f;
  }
  pending_ = false;
}

void ErrorFeedback::commit_dense() {
  SPARSGD_ENFORCE(pending_, "commit_dense() without a pending accumulate()");
  std::fill(buffer_.begin(), buffer_.end(), 0.0f);
  pending_ = false;
}

void ErrorFeedback::set_residual(std::span<const float> residual) {
  SPARSGD_ENFORCE_EQ(residual.size(), buffer_.size(), "residual length differs");
  std::copy(residual.begin(), residual.end(), buffer_.begin());
  pending_ = false;
}

}  // namespace sparsgd::compress
