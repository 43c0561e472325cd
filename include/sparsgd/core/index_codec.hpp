#pragma once
// Compressed ascending index sets, for messages whose indices cost more than their values (issue
// 17). A set of `count` strictly ascending indices below n is coded one of three ways, whichever
// is smallest for that set (raw on a tie with packed, either on a tie with the bitmap):
//   packed: the gaps (index - previous index - 1; the first index itself) in blocks of 512, each
//           block in the fewest bits that hold its largest gap (a width byte, then 64 width bytes
//           laid out for vectors: index_codec_kernels.hpp); a last block of fewer gaps is packed
//           least significant bit first in ceil(gaps * width / 8) bytes. About 13 bits an index at
//           density 0.001 (5.64 bytes a pair with float32 values, where the entropy floor is 5.42),
//           encoded and decoded at vector speed. Needs n <= 2^31.
//   bitmap: n bits, bit i set iff i is in the set (dense sets: density above about 1/8).
//   raw:    count little-endian uint32 (never larger than 4 bytes an index, whatever the gaps).
// A fourth coding, kept for comparison and never chosen by encode():
//   rice:   the gaps (index - previous index - 1; the first index itself) in a Golomb-Rice code
//           with parameter b: gap >> b in unary (that many 1 bits, then a 0), then gap's low b
//           bits; bits are packed least significant first. b comes from the mean gap
//           (round(log2(ln 2 * mean))), which is within a few percent of the entropy of a
//           uniformly random k-subset of n (log2(e n / k) bits an index): at density 0.001 about
//           11.5 bits an index against 32 raw, but its bit-serial unary codes cost about 2 ns an
//           index each way, several times the packed coding's time for 4% fewer bytes.
// The encoding starts with one byte naming the coding and one byte holding b (0 unless rice).
// Decoding of the packed coding is vectorized (index_codec_kernels.hpp) and checks every index.
// Decoding checks everything: the coding byte, b, that every index is below n and ascending,
// that exactly `count` indices are there, and that nothing but zero padding follows; a bad set
// throws wire::WireError and never reads outside the bytes it was given.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparsgd::index_codec {

enum class Coding : std::uint8_t { raw = 0, rice = 1, bitmap = 2, packed = 3 };

inline constexpr std::size_t kPrefixBytes = 2;  // coding, rice parameter

// The Rice parameter this codec uses for `count` indices below n.
unsigned rice_parameter(std::size_t count, std::uint32_t n);

// Expected encoded size (prefix included) of a uniformly random set of `count` indices below n,
// in the coding encode() would pick: what the cost model charges. Gaps are taken as geometric
// (P(gap >= g) = (1 - count / n)^g), and a packed block's width is that of its largest gap.
double expected_encoded_bytes(std::size_t count, std::uint32_t n);

// Exact encoded size (prefix included) of the set in each coding, and the smallest. Throws
// InvalidArgument unless the indices are strictly ascending and below n.
struct Sizes {
  std::size_t raw = 0, rice = 0, bitmap = 0;
  std::size_t packed = 0;  // SIZE_MAX where the set cannot be packed
  Coding best = Coding::raw;
  std::size_t best_bytes() const;
};
Sizes encoded_sizes(std::span<const std::uint32_t> indices, std::uint32_t n);

// Appends the encoding of `indices` (strictly ascending, each < n; InvalidArgument otherwise) to
// `out` in the smallest coding, or in the one named (tests, benchmarks); returns the bytes
// appended.
std::size_t encode(std::span<const std::uint32_t> indices, std::uint32_t n, std::vector<std::byte>& out);
std::size_t encode_as(Coding coding, std::span<const std::uint32_t> indices, std::uint32_t n,
                      std::vector<std::byte>& out);

// Decodes exactly `bytes` (one whole encoding) into out (out.size() == count). Throws WireError
// naming what is wrong when the bytes are not a valid encoding of `count` indices below n, or not
// the one encode() gives (another coding, or a packed block wider than its gaps need; rice is never
// given): one set, one byte string. A packed block's width is checked by decode_any already.
void decode(std::span<const std::byte> bytes, std::uint32_t n, std::span<std::uint32_t> out);
// The same without the last check: any valid coding is accepted (tests of encode_as).
void decode_any(std::span<const std::byte> bytes, std::uint32_t n, std::span<std::uint32_t> out);

}  // namespace sparsgd::index_codec
