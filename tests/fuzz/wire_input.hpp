#pragma once
// How fuzz_wire reads its input, shared with the seed writer (seeds.cpp) so that the seeds reach
// the decoders. The first kControlBytes bytes choose the entry point and what the receiving rank
// expects; the rest is the message. Letting some expectations come from the message's own header
// spares the fuzzer from guessing n, k and the algorithm before it can reach the body checks; taking
// them from the control bytes instead exercises the header mismatch paths.
//
//   byte 0: bits 0-1 mode (Mode below); bit 2 algorithm, bit 3 n, bit 4 k from the header;
//           bit 5 capacity and expected count from the header: capacity max(count, extra) +
//           (byte 6 & 3), expected mask bits = extra, expected dense values = count;
//           bit 6: sparse messages carry compressed indices (core/index_codec.hpp)
//   byte 1: algorithm        bytes 2-3: n        bytes 4-5: k
//   bytes 6-7: capacity      bytes 8-9: expected mask bits (mode kSparseMask) or value count (kDense)
// The expected dense count is capped at kMaxDenseValues (see below).
// Multi-byte fields are little-endian.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "sparsgd/core/wire.hpp"

namespace sparsgd::fuzz {

enum class Mode : std::uint8_t {
  kStream = 0,      // sparse_message_length splits the input into messages (as allgather does), each decoded
  kSparse = 1,      // decode_sparse, any mask length accepted
  kSparseMask = 2,  // decode_sparse with an expected mask length (as the gtopk broadcasts do)
  kDense = 3,       // decode_dense (the ring allreduce)
};

inline constexpr std::size_t kControlBytes = 10;
// A dense receiver sizes its buffer before the message comes, so that count is the receiver's own,
// not hostile; the cap keeps the fuzzer from spending its time zeroing 256 KB buffers. 4096 values
// is more than an input of libFuzzer's default -max_len (4096 bytes) can carry.
inline constexpr std::size_t kMaxDenseValues = 4096;

enum Flags : std::uint8_t {
  kAlgorithmFromHeader = 1u << 2,
  kNFromHeader = 1u << 3,
  kKFromHeader = 1u << 4,
  kCountsFromHeader = 1u << 5,
  kCompressedIndices = 1u << 6,
};

struct WireCase {
  Mode mode = Mode::kSparse;
  wire::Expectation expect;
  std::size_t expected = 0;  // mask bits (kSparseMask) or values (kDense)
  std::span<const std::byte> message;
};

inline std::uint32_t le16(const std::uint8_t* p) { return p[0] | (std::uint32_t{p[1]} << 8); }

// Returns false if the input is too short to hold the control bytes.
inline bool parse_wire_case(const std::uint8_t* data, std::size_t size, WireCase& c) {
  if (size < kControlBytes) return false;
  const std::uint8_t flags = data[0];
  c.mode = static_cast<Mode>(flags & 3u);
  c.message = std::as_bytes(std::span(data + kControlBytes, size - kControlBytes));
  c.expect.algorithm = data[1];
  c.expect.n = le16(data + 2);
  c.expect.k = le16(data + 4);
  c.expect.capacity = le16(data + 6);
  c.expect.from_rank = 7;
  c.expect.algorithm_name = "fuzz";
  c.expected = le16(data + 8);
  c.expect.index_coding = (flags & kCompressedIndices) ? wire::IndexCoding::compressed : wire::IndexCoding::raw;
  if (c.message.size() >= wire::kHeaderBytes) {
    std::uint32_t h[5];  // word, n, k, count, extra
    std::memcpy(h, c.message.data(), sizeof h);
    if (flags & kAlgorithmFromHeader) c.expect.algorithm = h[0] & 0xFFFFu;
    if (flags & kNFromHeader) c.expect.n = h[1];
    if (flags & kKFromHeader) c.expect.k = h[2];
    if (flags & kCountsFromHeader) {
      c.expect.capacity = std::size_t{std::max(h[3], h[4])} + (data[6] & 3u);
      c.expected = c.mode == Mode::kDense ? h[3] : h[4];
    }
  }
  if (c.mode == Mode::kDense) c.expected = std::min(c.expected, kMaxDenseValues);
  return true;
}

// The control bytes that make parse_wire_case reproduce (mode, expectation, expected) exactly.
inline void write_control(Mode mode, const wire::Expectation& e, std::size_t expected, std::uint8_t* out) {
  out[0] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(mode) |
                                     (e.index_coding == wire::IndexCoding::compressed ? kCompressedIndices : 0u));
  out[1] = static_cast<std::uint8_t>(e.algorithm);
  const std::uint32_t fields[4] = {e.n, e.k, static_cast<std::uint32_t>(e.capacity),
                                   static_cast<std::uint32_t>(expected)};
  for (int i = 0; i < 4; ++i) {
    out[2 + 2 * i] = static_cast<std::uint8_t>(fields[i]);
    out[3 + 2 * i] = static_cast<std::uint8_t>(fields[i] >> 8);
  }
}

}  // namespace sparsgd::fuzz
