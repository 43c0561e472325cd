#include "sparsgd/core/wire.hpp"

#include "core/wire_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace sparsgd::wire {
namespace {

constexpr std::uint32_t kSparseKind = 1;
constexpr std::uint32_t kDenseKind = 2;

std::uint32_t kind_word(std::uint32_t kind, std::uint32_t algorithm) {
  return (kMagic << 24) | ((kind & 0xFFu) << 16) | (algorithm & 0xFFFFu);
}

struct Header {
  std::uint32_t word, n, k, count, extra;
};

void write_header(const Header& h, std::byte* out) { std::memcpy(out, &h, kHeaderBytes); }

std::string who(const Expectation& e) { return "message from rank " + std::to_string(e.from_rank); }

[[noreturn]] void fail(const Expectation& e, const std::string& what) { throw WireError(who(e) + ": " + what); }

Header read_header(std::span<const std::byte> message, const Expectation& e, std::uint32_t kind) {
  if (message.size() < kHeaderBytes) {
    fail(e, "truncated: " + std::to_string(message.size()) + " bytes, shorter than the " +
                std::to_string(kHeaderBytes) + "-byte header");
  }
  Header h;
  std::memcpy(&h, message.data(), kHeaderBytes);
  if ((h.word >> 24) != kMagic) fail(e, "not a sparsgd message (bad magic byte)");
  const std::uint32_t got_kind = (h.word >> 16) & 0xFFu;
  const std::uint32_t got_algorithm = h.word & 0xFFFFu;
  if (got_algorithm != e.algorithm) {
    fail(e, "the peer runs aggregation algorithm id " + std::to_string(got_algorithm) + " but this rank runs " +
                std::string(e.algorithm_name) + " (id " + std::to_string(e.algorithm) +
                "): all ranks must use the same aggregator");
  }
  if (got_kind != kind) fail(e, "unexpected message kind " + std::to_string(got_kind));
  if (h.n != e.n) {
    fail(e, "the peer's gradient length n = " + std::to_string(h.n) + " differs from this rank's n = " +
                std::to_string(e.n));
  }
  if (h.k != e.k) {
    fail(e, "the peer's k = " + std::to_string(h.k) + " differs from this rank's k = " + std::to_string(e.k));
  }
  if (h.count > e.capacity) {
    fail(e, "count " + std::to_string(h.count) + " exceeds the capacity " + std::to_string(e.capacity));
  }
  return h;
}

}  // namespace

std::size_t sparse_message_bytes(std::size_t count, std::size_t mask_bits) {
  return kHeaderBytes + 8 * count + (mask_bits + 7) / 8;
}

std::size_t dense_message_bytes(std::size_t count) { return kHeaderBytes + 4 * count; }

namespace {

// The entries of a message, typed in place. The message buffers are only ever read and written as
// these arrays or through memcpy; offsets 20 and 20 + 4 count keep them 4-byte aligned when the
// buffer is (std::vector's storage from operator new is aligned for any fundamental type).
template <typename Byte>
auto entries_at(Byte* message, std::size_t count) {
  constexpr bool kConst = std::is_const_v<Byte>;
  using Index = std::conditional_t<kConst, const std::uint32_t, std::uint32_t>;
  using Value = std::conditional_t<kConst, const float, float>;
  SPARSGD_ENFORCE(reinterpret_cast<std::uintptr_t>(message) % alignof(std::uint32_t) == 0,
                  "message buffer is not 4-byte aligned");
  auto* indices = reinterpret_cast<Index*>(message + kHeaderBytes);
  auto* values = reinterpret_cast<Value*>(message + kHeaderBytes + 4 * count);
  return std::pair{indices, values};
}

}  // namespace

SparseSlots encode_sparse(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k,
                          std::span<const std::uint32_t> indices, std::span<const float> values,
                          std::span<const std::uint8_t> mask, std::vector<std::byte>& out) {
  SPARSGD_ENFORCE_EQ(indices.size(), values.size(), "sparse message arrays differ in length");
  const std::size_t count = indices.size();
  out.resize(sparse_message_bytes(count, mask.size()));
  write_header({kind_word(kSparseKind, algorithm), n, k, static_cast<std::uint32_t>(count),
                static_cast<std::uint32_t>(mask.size())},
               out.data());
  std::byte* p = out.data() + kHeaderBytes;
  if (count > 0) {
    std::memcpy(p, indices.data(), 4 * count);
    std::memcpy(p + 4 * count, values.data(), 4 * count);
  }
  std::byte* m = p + 8 * count;
  std::memset(m, 0, (mask.size() + 7) / 8);
  for (std::size_t b = 0; b < mask.size(); ++b) {
    if (mask[b]) m[b / 8] |= static_cast<std::byte>(1u << (b % 8));
  }
  const auto [idx, val] = entries_at(out.data(), count);
  return {idx, val};
}

void encode_dense(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k, std::span<const float> values,
                  std::uint32_t extra, std::vector<std::byte>& out) {
  out.resize(dense_message_bytes(values.size()));
  write_header({kind_word(kDenseKind, algorithm), n, k, static_cast<std::uint32_t>(values.size()), extra}, out.data());
  if (!values.empty()) std::memcpy(out.data() + kHeaderBytes, values.data(), 4 * values.size());
}

std::size_t sparse_message_length(std::span<const std::byte> bytes, const Expectation& expect) {
  const Header h = read_header(bytes, expect, kSparseKind);
  const std::size_t length = sparse_message_bytes(h.count, h.extra);
  if (length > bytes.size()) {
    fail(expect, "truncated: the header announces " + std::to_string(length) + " bytes but only " +
                     std::to_string(bytes.size()) + " remain");
  }
  return length;
}

namespace {

// Header, length and mask of a sparse message; returns the header.
Header validate_sparse_frame(std::span<const std::byte> message, const Expectation& expect,
                             std::size_t expected_mask_bits) {
  const Header h = read_header(message, expect, kSparseKind);
  if (expected_mask_bits != SIZE_MAX && h.extra != expected_mask_bits) {
    fail(expect, "mask of " + std::to_string(h.extra) + " bits where " + std::to_string(expected_mask_bits) +
                     " were expected");
  }
  if (h.extra > expect.capacity) fail(expect, "mask longer than the capacity");
  const std::size_t expected_bytes = sparse_message_bytes(h.count, h.extra);
  if (message.size() != expected_bytes) {
    fail(expect, (message.size() < expected_bytes ? "truncated: " : "overlong: ") + std::to_string(message.size()) +
                     " bytes where the header announces " + std::to_string(expected_bytes));
  }
  const std::byte* m = message.data() + kHeaderBytes + 8 * std::size_t{h.count};
  // encode_sparse leaves the bits past the mask's end in its last byte zero; refusing anything else
  // catches corruption there and keeps the format canonical (one message, one byte string).
  if (h.extra % 8 != 0 && (std::to_integer<unsigned>(m[h.extra / 8]) >> (h.extra % 8)) != 0) {
    fail(expect, "mask padding bits set after the " + std::to_string(h.extra) + " mask bits");
  }
  return h;
}

// Every entry: index in range and strictly ascending, value finite.
void validate_entries(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n,
                      const Expectation& expect) {
  if (entries_valid(idx, val, count, n)) return;
  const EntryFault fault = first_invalid_entry(idx, val, count, n);
  const std::size_t i = fault.position;
  switch (fault.kind) {
    case EntryFault::index_out_of_range:
      fail(expect, "index " + std::to_string(idx[i]) + " out of range for n = " + std::to_string(n));
    case EntryFault::not_ascending:
      fail(expect, "indices not strictly ascending");
    case EntryFault::not_finite:
      fail(expect, "non-finite value at index " + std::to_string(idx[i]));
    case EntryFault::none:
      break;
  }
}

}  // namespace

SparseView decode_sparse_view(std::span<const std::byte> message, const Expectation& expect) {
  const Header h = validate_sparse_frame(message, expect, 0);
  const auto [idx, val] = entries_at(message.data(), h.count);
  validate_entries(idx, val, h.count, h.n, expect);
  return {h.n, {idx, h.count}, {val, h.count}};
}

SparseSlots prepare_sparse(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k, std::size_t count,
                           std::vector<std::byte>& out) {
  out.resize(sparse_message_bytes(count));
  write_header({kind_word(kSparseKind, algorithm), n, k, static_cast<std::uint32_t>(count), 0}, out.data());
  const auto [idx, val] = entries_at(out.data(), count);
  return {idx, val};
}

void decode_sparse(std::span<const std::byte> message, const Expectation& expect, SparseVector& out,
                   std::vector<std::uint8_t>& mask, std::size_t expected_mask_bits) {
  // Copied first, then checked in the copy: the message may sit at any alignment (messages carried
  // back to back in one buffer), the copy is aligned.
  const Header h = validate_sparse_frame(message, expect, expected_mask_bits);
  const std::size_t count = h.count;
  out.dim = h.n;
  out.resize(count);
  const std::byte* p = message.data() + kHeaderBytes;
  if (count > 0) {
    std::memcpy(out.indices.data(), p, 4 * count);
    std::memcpy(out.values.data(), p + 4 * count, 4 * count);
  }
  validate_entries(out.indices.data(), out.values.data(), count, h.n, expect);
  const std::byte* m = p + 8 * count;
  mask.resize(h.extra);
  for (std::size_t b = 0; b < h.extra; ++b) mask[b] = static_cast<std::uint8_t>((std::to_integer<unsigned>(m[b / 8]) >> (b % 8)) & 1u);
}

std::uint32_t decode_dense(std::span<const std::byte> message, const Expectation& expect, std::size_t expected_count,
                           std::span<float> values) {
  const Header h = read_header(message, expect, kDenseKind);
  if (h.count != expected_count) {
    fail(expect, "dense chunk of " + std::to_string(h.count) + " values where " + std::to_string(expected_count) +
                     " were expected");
  }
  if (message.size() != dense_message_bytes(h.count)) {
    fail(expect, "dense message of " + std::to_string(message.size()) + " bytes where the header announces " +
                     std::to_string(dense_message_bytes(h.count)));
  }
  SPARSGD_ENFORCE_GE(values.size(), expected_count, "dense output too short");
  if (h.count > 0) std::memcpy(values.data(), message.data() + kHeaderBytes, 4 * h.count);
  for (std::size_t i = 0; i < h.count; ++i) {
    if (!std::isfinite(values[i])) fail(expect, "non-finite value at position " + std::to_string(i));
  }
  return h.extra;
}

}  // namespace sparsgd::wire
