// libFuzzer target for the wire decoder (core/wire.hpp): every message a rank receives from a peer
// goes through sparse_message_length, decode_sparse (or decode_sparse_view, its in-place form) or
// decode_dense, so they must refuse any byte
// string with a WireError and never read out of bounds, allocate without bound or hand back
// something that violates the format. The input layout is in wire_input.hpp.
//
// Only WireError is caught: any other exception escapes, terminates and counts as a crash. On
// success the decoded message is checked against the format (indices ascending and < n, values
// finite, count within capacity, mask of 0/1 bits) and encoded again, which must give back the very
// same bytes: the decoder accepts exactly the encoder's output, nothing more lenient.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "invariant.hpp"
#include "sparsgd/core/wire.hpp"
#include "wire_input.hpp"

namespace sparsgd::fuzz {
namespace {

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Checks a message that decode_sparse accepted.
void check_sparse(std::span<const std::byte> message, const wire::Expectation& e, std::size_t expected_mask_bits,
                  const SparseVector& out, const std::vector<std::uint8_t>& mask) {
  FUZZ_REQUIRE(out.dim == e.n);
  FUZZ_REQUIRE(out.indices.size() == out.values.size());
  FUZZ_REQUIRE(out.size() <= e.capacity);
  FUZZ_REQUIRE(mask.size() <= e.capacity);
  if (expected_mask_bits != SIZE_MAX) FUZZ_REQUIRE(mask.size() == expected_mask_bits);
  for (std::size_t i = 0; i < out.size(); ++i) {
    FUZZ_REQUIRE(out.indices[i] < e.n);
    FUZZ_REQUIRE(i == 0 || out.indices[i] > out.indices[i - 1]);
    FUZZ_REQUIRE(std::isfinite(out.values[i]));
  }
  for (const std::uint8_t bit : mask) FUZZ_REQUIRE(bit <= 1);
  if (e.index_coding == wire::IndexCoding::raw) {
    FUZZ_REQUIRE(message.size() == wire::sparse_message_bytes(out.size(), mask.size()));
  } else {
    FUZZ_REQUIRE(message.size() <= wire::max_sparse_message_bytes(out.size(), mask.size(), e.index_coding));
  }
  // The length function must agree with the decoder on a message the decoder accepted.
  FUZZ_REQUIRE(wire::sparse_message_length(message, e) == message.size());
  std::vector<std::byte> again;
  wire::encode_sparse(e.algorithm, e.n, e.k, out.indices, out.values, mask, again, e.index_coding);
  FUZZ_REQUIRE(same_bytes(again, message));
}

// The in-place decoder (mask-less messages, as gtopk-rd receives them) must accept exactly what
// decode_sparse accepts with no mask, and see the same entries. `accepted`: decode_sparse's result,
// or null if it refused the message.
void decode_view(std::span<const std::byte> message, const wire::Expectation& e, const SparseVector* accepted) {
  const std::vector<std::byte> aligned(message.begin(), message.end());  // a vector's storage is aligned
  try {
    std::vector<std::uint32_t> index_scratch;
    const SparseView v = wire::decode_sparse_view(aligned, e, index_scratch);
    FUZZ_REQUIRE(accepted != nullptr);
    FUZZ_REQUIRE(v.dim == accepted->dim && v.size() == accepted->size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      FUZZ_REQUIRE(v.indices[i] == accepted->indices[i]);
      FUZZ_REQUIRE(std::memcmp(&v.values[i], &accepted->values[i], sizeof(float)) == 0);
    }
  } catch (const wire::WireError&) {
    FUZZ_REQUIRE(accepted == nullptr);
  }
}

void decode_one_sparse(std::span<const std::byte> message, const wire::Expectation& e, std::size_t expected_mask_bits) {
  SparseVector out;
  std::vector<std::uint8_t> mask;
  try {
    wire::decode_sparse(message, e, out, mask, expected_mask_bits);
  } catch (const wire::WireError&) {
    if (expected_mask_bits == 0) decode_view(message, e, nullptr);
    return;
  }
  check_sparse(message, e, expected_mask_bits, out, mask);
  if (expected_mask_bits == 0) decode_view(message, e, &out);
}

// As allgather does: the input is several messages back to back, split by their headers.
void stream(std::span<const std::byte> bytes, const wire::Expectation& e) {
  std::span<const std::byte> rest = bytes;
  while (!rest.empty()) {
    std::size_t length = 0;
    try {
      length = wire::sparse_message_length(rest, e);
    } catch (const wire::WireError&) {
      return;
    }
    FUZZ_REQUIRE(length >= wire::kHeaderBytes && length <= rest.size());
    decode_one_sparse(rest.first(length), e, SIZE_MAX);
    decode_one_sparse(rest.first(length), e, 0);  // what allgather asks for: no mask
    rest = rest.subspan(length);
  }
}

void dense(std::span<const std::byte> message, const wire::Expectation& e, std::size_t expected_count) {
  // Exactly expected_count floats, so AddressSanitizer sees any write past the end.
  std::vector<float> values(expected_count);
  std::uint32_t extra = 0;
  try {
    extra = wire::decode_dense(message, e, expected_count, values);
  } catch (const wire::WireError&) {
    return;
  }
  FUZZ_REQUIRE(expected_count <= e.capacity);
  for (const float v : values) FUZZ_REQUIRE(std::isfinite(v));
  std::vector<std::byte> again;
  wire::encode_dense(e.algorithm, e.n, e.k, values, extra, again);
  FUZZ_REQUIRE(same_bytes(again, message));
}

}  // namespace
}  // namespace sparsgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparsgd::fuzz;
  WireCase c;
  if (!parse_wire_case(data, size, c)) return 0;
  switch (c.mode) {
    case Mode::kStream: stream(c.message, c.expect); break;
    case Mode::kSparse: decode_one_sparse(c.message, c.expect, SIZE_MAX); break;
    case Mode::kSparseMask: decode_one_sparse(c.message, c.expect, c.expected); break;
    case Mode::kDense: dense(c.message, c.expect, c.expected); break;
  }
  return 0;
}
