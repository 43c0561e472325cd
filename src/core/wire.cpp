#include "sparsgd/core/wire.hpp"

#include "core/wire_kernels.hpp"
#include "sparsgd/core/index_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace sparsgd::wire {
namespace {

constexpr std::uint32_t kSparseKind = 1;
constexpr std::uint32_t kDenseKind = 2;
constexpr std::uint32_t kSparseCodedKind = 3;
// A message with compressed indices states their length after the header: they sit after the
// values, so that the values keep their 4-byte alignment.
constexpr std::size_t kCodedPrefixBytes = 4;

std::uint32_t sparse_kind(IndexCoding coding) {
  return coding == IndexCoding::compressed ? kSparseCodedKind : kSparseKind;
}

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
  if (got_kind != kind) {
    const auto sparse = [](std::uint32_t x) { return x == kSparseKind || x == kSparseCodedKind; };
    if (sparse(got_kind) && sparse(kind)) {
      const auto coding = [](std::uint32_t x) { return x == kSparseCodedKind ? "compressed" : "raw"; };
      fail(e, std::string("the peer sends ") + coding(got_kind) + " indices but this rank expects " + coding(kind) +
                  " ones: all ranks must use the same index coding");
    }
    fail(e, "unexpected message kind " + std::to_string(got_kind));
  }
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

std::size_t max_sparse_message_bytes(std::size_t count, std::size_t mask_bits, IndexCoding coding) {
  const std::size_t raw = sparse_message_bytes(count, mask_bits);
  return coding == IndexCoding::compressed ? raw + kCodedPrefixBytes + index_codec::kPrefixBytes : raw;
}

std::size_t dense_message_bytes(std::size_t count) { return kHeaderBytes + 4 * count; }

const char* index_coding_name(IndexCoding coding) {
  return coding == IndexCoding::compressed ? "compressed" : "raw";
}

IndexCoding parse_index_coding(const std::string& name) {
  if (name == "raw") return IndexCoding::raw;
  if (name == "compressed") return IndexCoding::compressed;
  throw InvalidArgument("unknown index coding '" + name + "' (expected raw or compressed)");
}

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

namespace {

void write_mask(std::span<const std::uint8_t> mask, std::byte* m) {
  std::memset(m, 0, (mask.size() + 7) / 8);
  for (std::size_t b = 0; b < mask.size(); ++b) {
    if (mask[b]) m[b / 8] |= static_cast<std::byte>(1u << (b % 8));
  }
}

}  // namespace

SparseSlots encode_sparse(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k,
                          std::span<const std::uint32_t> indices, std::span<const float> values,
                          std::span<const std::uint8_t> mask, std::vector<std::byte>& out, IndexCoding coding) {
  SPARSGD_ENFORCE_EQ(indices.size(), values.size(), "sparse message arrays differ in length");
  const std::size_t count = indices.size();
  const Header header{kind_word(sparse_kind(coding), algorithm), n, k, static_cast<std::uint32_t>(count),
                      static_cast<std::uint32_t>(mask.size())};
  if (coding == IndexCoding::compressed) {
    const std::size_t values_at = kHeaderBytes + kCodedPrefixBytes;
    out.resize(values_at + 4 * count);
    write_header(header, out.data());
    if (count > 0) std::memcpy(out.data() + values_at, values.data(), 4 * count);
    const auto index_bytes = static_cast<std::uint32_t>(index_codec::encode(indices, n, out));
    std::memcpy(out.data() + kHeaderBytes, &index_bytes, kCodedPrefixBytes);
    const std::size_t mask_at = out.size();
    out.resize(mask_at + (mask.size() + 7) / 8);
    write_mask(mask, out.data() + mask_at);
    SPARSGD_ENFORCE(reinterpret_cast<std::uintptr_t>(out.data()) % alignof(float) == 0,
                    "message buffer is not 4-byte aligned");
    return {nullptr, reinterpret_cast<float*>(out.data() + values_at)};
  }
  out.resize(sparse_message_bytes(count, mask.size()));
  write_header(header, out.data());
  std::byte* p = out.data() + kHeaderBytes;
  if (count > 0) {
    std::memcpy(p, indices.data(), 4 * count);
    std::memcpy(p + 4 * count, values.data(), 4 * count);
  }
  write_mask(mask, p + 8 * count);
  const auto [idx, val] = entries_at(out.data(), count);
  return {idx, val};
}

void encode_dense(std::uint32_t algorithm, std::uint32_t n, std::uint32_t k, std::span<const float> values,
                  std::uint32_t extra, std::vector<std::byte>& out) {
  out.resize(dense_message_bytes(values.size()));
  write_header({kind_word(kDenseKind, algorithm), n, k, static_cast<std::uint32_t>(values.size()), extra}, out.data());
  if (!values.empty()) std::memcpy(out.data() + kHeaderBytes, values.data(), 4 * values.size());
}

namespace {

// Where the parts of a sparse message lie, from its header (and, with compressed indices, the
// length of their code), checked against the bytes at hand.
struct SparseLayout {
  Header header;
  std::size_t values_at = 0, indices_at = 0, index_bytes = 0, mask_at = 0, length = 0;
};

SparseLayout sparse_layout(std::span<const std::byte> bytes, const Expectation& expect) {
  SparseLayout l;
  l.header = read_header(bytes, expect, sparse_kind(expect.index_coding));
  const std::size_t count = l.header.count;
  if (expect.index_coding == IndexCoding::compressed) {
    if (bytes.size() < kHeaderBytes + kCodedPrefixBytes) {
      fail(expect, "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header and the length of the indices");
    }
    std::uint32_t index_bytes = 0;
    std::memcpy(&index_bytes, bytes.data() + kHeaderBytes, kCodedPrefixBytes);
    // The codec never takes more than raw indices (it would send them raw).
    if (index_bytes < index_codec::kPrefixBytes || index_bytes > index_codec::kPrefixBytes + 4 * count) {
      fail(expect, "compressed indices of " + std::to_string(index_bytes) + " bytes for " + std::to_string(count) +
                       " entries (at most " + std::to_string(index_codec::kPrefixBytes + 4 * count) + ")");
    }
    l.values_at = kHeaderBytes + kCodedPrefixBytes;
    l.indices_at = l.values_at + 4 * count;
    l.index_bytes = index_bytes;
  } else {
    l.indices_at = kHeaderBytes;
    l.index_bytes = 4 * count;
    l.values_at = l.indices_at + l.index_bytes;
  }
  l.mask_at = std::max(l.indices_at + l.index_bytes, l.values_at + 4 * count);  // after whichever comes last
  l.length = l.mask_at + (std::size_t{l.header.extra} + 7) / 8;
  return l;
}

}  // namespace

std::size_t sparse_message_length(std::span<const std::byte> bytes, const Expectation& expect) {
  const SparseLayout l = sparse_layout(bytes, expect);
  if (l.length > bytes.size()) {
    fail(expect, "truncated: the header announces " + std::to_string(l.length) + " bytes but only " +
                     std::to_string(bytes.size()) + " remain");
  }
  return l.length;
}

namespace {

// Header, length and mask of a sparse message; returns its layout.
SparseLayout validate_sparse_frame(std::span<const std::byte> message, const Expectation& expect,
                                   std::size_t expected_mask_bits) {
  const SparseLayout l = sparse_layout(message, expect);
  const Header& h = l.header;
  if (expected_mask_bits != SIZE_MAX && h.extra != expected_mask_bits) {
    fail(expect, "mask of " + std::to_string(h.extra) + " bits where " + std::to_string(expected_mask_bits) +
                     " were expected");
  }
  if (h.extra > expect.capacity) fail(expect, "mask longer than the capacity");
  if (message.size() != l.length) {
    fail(expect, (message.size() < l.length ? "truncated: " : "overlong: ") + std::to_string(message.size()) +
                     " bytes where the header announces " + std::to_string(l.length));
  }
  const std::byte* m = message.data() + l.mask_at;
  // encode_sparse leaves the bits past the mask's end in its last byte zero; refusing anything else
  // catches corruption there and keeps the format canonical (one message, one byte string).
  if (h.extra % 8 != 0 && (std::to_integer<unsigned>(m[h.extra / 8]) >> (h.extra % 8)) != 0) {
    fail(expect, "mask padding bits set after the " + std::to_string(h.extra) + " mask bits");
  }
  return l;
}

// Decodes compressed indices into out (out.size() = the count), naming the sender in the error.
void decode_indices(std::span<const std::byte> message, const SparseLayout& l, const Expectation& expect,
                    std::span<std::uint32_t> out) {
  try {
    index_codec::decode(message.subspan(l.indices_at, l.index_bytes), l.header.n, out);
  } catch (const WireError& e) {
    fail(expect, e.what());
  }
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

SparseView decode_sparse_view(std::span<const std::byte> message, const Expectation& expect,
                              std::vector<std::uint32_t>& index_scratch) {
  const SparseLayout l = validate_sparse_frame(message, expect, 0);
  const std::size_t count = l.header.count;
  SPARSGD_ENFORCE(reinterpret_cast<std::uintptr_t>(message.data()) % alignof(float) == 0,
                  "message buffer is not 4-byte aligned");
  const auto* val = reinterpret_cast<const float*>(message.data() + l.values_at);
  const std::uint32_t* idx = nullptr;
  if (expect.index_coding == IndexCoding::compressed) {
    index_scratch.resize(count);
    decode_indices(message, l, expect, index_scratch);
    idx = index_scratch.data();
  } else {
    idx = reinterpret_cast<const std::uint32_t*>(message.data() + l.indices_at);
  }
  validate_entries(idx, val, count, l.header.n, expect);
  return {l.header.n, {idx, count}, {val, count}};
}

SparseView decode_sparse_view(std::span<const std::byte> message, const Expectation& expect) {
  SPARSGD_ENFORCE(expect.index_coding == IndexCoding::raw,
                  "decode_sparse_view without scratch room reads raw indices only");
  std::vector<std::uint32_t> unused;
  return decode_sparse_view(message, expect, unused);
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
  const SparseLayout l = validate_sparse_frame(message, expect, expected_mask_bits);
  const Header& h = l.header;
  const std::size_t count = h.count;
  out.dim = h.n;
  out.resize(count);
  if (expect.index_coding == IndexCoding::compressed) {
    decode_indices(message, l, expect, out.indices);
  } else if (count > 0) {
    std::memcpy(out.indices.data(), message.data() + l.indices_at, 4 * count);
  }
  if (count > 0) std::memcpy(out.values.data(), message.data() + l.values_at, 4 * count);
  validate_entries(out.indices.data(), out.values.data(), count, h.n, expect);
  const std::byte* m = message.data() + l.mask_at;
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
