#pragma once
// Wire format of collective messages, and its validation. Every message starts with a header
//   u32 kind (magic in the top byte, message kind and algorithm below), u32 n, u32 k, u32 count,
//   u32 extra
// followed by the body:
//   sparse: count uint32 indices (strictly ascending, < n), then count float32 values, then
//           ceil(extra / 8) bytes of a bit mask of `extra` bits (0 when no mask is attached);
//   sparse with compressed indices (its own message kind): u32 index_bytes, count float32
//           values, index_bytes of the indices coded by core/index_codec.hpp (the smallest of
//           packed gaps, a bitmap or raw, stated in the code's own prefix), then the mask;
//   dense:  count float32 values; `extra` is free for the algorithm (a checksum, say).
// All little-endian (the only byte order this library targets). A received message is checked
// completely before use: header fields against what this rank expects (so ranks that disagree on
// n, k or the algorithm fail with a message saying so), count within capacity, exact length, every
// index in range and ascending, every value finite. Failures throw WireError.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::wire {

class WireError : public Error {
 public:
  using Error::Error;
};

inline constexpr std::size_t kHeaderBytes = 20;
inline constexpr std::uint32_t kMagic = 0x53u;  // 'S'

// How a sparse message carries its indices; all ranks of a job must use the same.
enum class IndexCoding : std::uint8_t { raw, compressed };
const char* index_coding_name(IndexCoding coding);  // "raw", "compressed"
// Throws InvalidArgument naming the accepted values for anything but "raw" or "compressed".
IndexCoding parse_index_coding(const std::string& name);

// What a rank expects of a message: who sent it (for the error text), the algorithm id that all
// ranks must share, and n and k.
struct Expectation {
  std::uint32_t algorithm = 0;
  std::uint32_t n = 0;
  std::uint32_t k = 0;
  std::size_t capacity = 0;  // most entries (sparse) or values (dense) accepted
  int from_rank = -1;
  const char* algorithm_name = "";
  IndexCoding index_coding = IndexCoding::raw;  // how sparse messages must carry their indices
};

// A sparse message of `count` raw entries and a mask of `mask_bits` bits.
std::size_t sparse_message_bytes(std::size_t count, std::size_t mask_bits = 0);
// The most bytes a sparse message of at most `count` entries may take in that coding (what a
// receive must accept): compressed indices never take more than raw ones plus their framing.
std::size_t max_sparse_message_bytes(std::size_t count, std::size_t mask_bits, IndexCoding coding);
std::size_t dense_message_bytes(std::size_t count);

struct SparseSlots;
// Appends nothing: `out` is resized to exactly the message. Returns where the entries now lie in
// `out` (for a caller that goes on using or changing them there; indices is null when they are
// compressed).
SparseSlots encode_sparse(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k,
                          std::span<const std::uint32_t> indices, std::span<const float> values,
                          std::span<const std::uint8_t> mask, std::vector<std::byte>& out,
                          IndexCoding coding = IndexCoding::raw);
void encode_dense(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k, std::span<const float> values,
                  std::uint32_t extra, std::vector<std::byte>& out);

// Validates the header of the sparse message at the start of `bytes` and returns the length of
// that whole message (for messages that carry several back to back). Throws if it does not fit.
std::size_t sparse_message_length(std::span<const std::byte> bytes, const Expectation& expect);

// Validates a sparse message without a mask and returns its entries in place: the view points into
// `message`, which must outlive it and stay unchanged. Compressed indices (expect.index_coding)
// are decoded into `index_scratch`, which the view then points into for its indices.
SparseView decode_sparse_view(std::span<const std::byte> message, const Expectation& expect,
                              std::vector<std::uint32_t>& index_scratch);
// The same for raw indices only (InvalidArgument if expect asks for compressed ones).
SparseView decode_sparse_view(std::span<const std::byte> message, const Expectation& expect);

// Where a sparse message's entries lie (see encode_sparse and prepare_sparse).
struct SparseSlots {
  std::uint32_t* indices = nullptr;
  float* values = nullptr;
};
// Sizes `out` for a sparse message of `count` raw entries without a mask and writes its header;
// the caller then writes the entries (ascending indices) through the returned pointers.
SparseSlots prepare_sparse(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k, std::size_t count,
                           std::vector<std::byte>& out);

// Decodes a sparse message into out (out.dim = n) and its mask (one byte per bit, 0 or 1) into
// mask. expected_mask_bits, if not SIZE_MAX, must equal the mask length sent.
void decode_sparse(std::span<const std::byte> message, const Expectation& expect, SparseVector& out,
                   std::vector<std::uint8_t>& mask, std::size_t expected_mask_bits = SIZE_MAX);
// Decodes a dense message of exactly expected_count values into `values`; returns `extra`.
std::uint32_t decode_dense(std::span<const std::byte> message, const Expectation& expect, std::size_t expected_count,
                           std::span<float> values);

}  // namespace sparsgd::wire
