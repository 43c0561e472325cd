#include "sparsgd/core/index_codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "core/index_codec_kernels.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::index_codec {
namespace {

constexpr unsigned kMaxRice = 31;
constexpr unsigned kMaxPackedWidth = 31;
constexpr std::uint64_t kMaxPackedN = std::uint64_t{1} << 31;
constexpr std::size_t kNoSize = static_cast<std::size_t>(-1);
using kernels::kBlockGaps;

[[noreturn]] void bad(const std::string& what) { throw wire::WireError("compressed indices: " + what); }

// The encoder's refusal of index i, which is not below n or not above the one before it.
[[noreturn]] void refuse_index(std::uint32_t index, std::size_t i, std::uint32_t n) {
  SPARSGD_ENFORCE(index < n, "index " << index << " at " << i << " is not below n = " << n);
  throw InvalidArgument("indices must be strictly ascending (at " + std::to_string(i) + ")");
}

// Bits of the Rice code of the gaps with parameter b; checks on the way that the indices are
// strictly ascending and below n (InvalidArgument).
std::uint64_t checked_rice_bits(std::span<const std::uint32_t> indices, std::uint32_t n, unsigned b) {
  std::uint64_t bits = static_cast<std::uint64_t>(indices.size()) * (b + 1);
  std::uint64_t next = 0;  // the smallest index the next one may be
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::uint32_t index = indices[i];
    if (index < next || index >= n) [[unlikely]] refuse_index(index, i, n);
    bits += (index - next) >> b;
    next = static_cast<std::uint64_t>(index) + 1;
  }
  return bits;
}

// Writes bits least significant first into a buffer sized beforehand (with 8 bytes of slack, so
// that a whole word can always be stored).
class BitWriter {
 public:
  explicit BitWriter(std::byte* out) : out_(out) {}
  void put(std::uint64_t value, unsigned bits) {  // bits <= 32, value < 2^bits
    word_ |= value << used_;
    used_ += bits;
    if (used_ >= 32) {
      std::memcpy(out_, &word_, 8);
      out_ += 4;
      word_ >>= 32;
      used_ -= 32;
    }
  }
  void ones(std::uint64_t count) {
    for (; count >= 32; count -= 32) put(0xffffffffu, 32);
    if (count > 0) put((std::uint64_t{1} << count) - 1, static_cast<unsigned>(count));
  }
  void finish() { std::memcpy(out_, &word_, 8); }

 private:
  std::byte* out_;
  std::uint64_t word_ = 0;
  unsigned used_ = 0;
};

// Reads bits least significant first; 56 to 63 bits are buffered after refill() unless the input
// ends (the branch-free refill of zstd's bit streams: overlapping loads OR in the same bits). Never
// 64: consume(available()) would then shift a 64-bit word by its width.
class BitReader {
 public:
  explicit BitReader(std::span<const std::byte> in)
      : p_(reinterpret_cast<const std::uint8_t*>(in.data())), end_(p_ + in.size()) {}
  void refill() {
    if (end_ - p_ >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p_, 8);
      buffer_ |= word << available_;
      p_ += (63 - available_) >> 3;
      available_ |= 56;
    } else {
      while (available_ < 56 && p_ < end_) {
        buffer_ |= static_cast<std::uint64_t>(*p_++) << available_;
        available_ += 8;
      }
    }
  }
  std::uint64_t buffer() const { return buffer_; }
  unsigned available() const { return available_; }
  void consume(unsigned bits) {  // bits <= available() < 64
    buffer_ >>= bits;
    available_ -= bits;
  }
  bool exhausted() const { return p_ == end_; }
  // Bits not yet consumed, buffered or not.
  std::uint64_t left() const { return available_ + 8 * static_cast<std::uint64_t>(end_ - p_); }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint64_t buffer_ = 0;
  unsigned available_ = 0;
};

// Room for the Rice code of `count` indices below n with parameter b, whatever their gaps (the
// quotients sum to at most n >> b, since the gaps sum to less than n), and the writer's slack.
std::size_t rice_room(std::size_t count, std::uint32_t n, unsigned b) {
  const std::uint64_t bits = static_cast<std::uint64_t>(count) * (b + 1) + (std::uint64_t{n} >> b);
  return static_cast<std::size_t>((bits + 7) / 8) + 8;
}

// Writes the Rice code of the gaps at dst (rice_room bytes) and returns its length in bits;
// checks on the way that the indices are strictly ascending and below n (InvalidArgument), so
// that encoding is one pass.
std::uint64_t write_rice(std::span<const std::uint32_t> indices, std::uint32_t n, unsigned b, std::byte* dst) {
  BitWriter writer(dst);
  std::uint64_t next = 0;  // the smallest index the next one may be
  std::uint64_t bits = static_cast<std::uint64_t>(indices.size()) * (b + 1);
  const std::uint32_t low_mask = (std::uint32_t{1} << b) - 1;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::uint32_t index = indices[i];
    if (index < next || index >= n) [[unlikely]] refuse_index(index, i, n);
    const auto gap = static_cast<std::uint32_t>(index - next);
    const std::uint32_t quotient = gap >> b;
    bits += quotient;
    if (quotient < 32) {
      // The unary part, its terminating 0 and the low bits in one put when they fit.
      const unsigned length = quotient + 1 + b;
      const std::uint64_t code = ((std::uint64_t{1} << quotient) - 1) | (static_cast<std::uint64_t>(gap & low_mask) << (quotient + 1));
      if (length <= 32) {
        writer.put(code, length);
      } else {
        writer.put(code & 0xffffffffu, 32);
        writer.put(code >> 32, length - 32);
      }
    } else {
      writer.ones(quotient);
      writer.put(static_cast<std::uint64_t>(gap & low_mask) << 1, b + 1);
    }
    next = static_cast<std::uint64_t>(index) + 1;
  }
  writer.finish();
  return bits;
}

// Appends the Rice code of indices already known to be valid; returns its bytes.
std::size_t append_rice(std::span<const std::uint32_t> indices, std::uint32_t n, unsigned b, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  out.resize(at + rice_room(indices.size(), n, b));
  const auto bytes = static_cast<std::size_t>((write_rice(indices, n, b, out.data() + at) + 7) / 8);
  out.resize(at + bytes);
  return bytes;
}

// The encoder's choice: the smallest of raw, packed and bitmap; raw on a tie with packed, either on
// a tie with the bitmap. (Rice is never chosen: see index_codec.hpp.)
Coding smallest(std::size_t raw, std::size_t packed, std::size_t bitmap) {
  Coding best = packed < raw ? Coding::packed : Coding::raw;
  if (bitmap < std::min(raw, packed)) best = Coding::bitmap;
  return best;
}

// The gaps of a set and each block's width, for the packed coding.
struct PackedPlan {
  std::vector<std::uint32_t> gaps;
  std::vector<std::uint8_t> widths;  // per block of kBlockGaps, the tail last
  std::size_t bytes = kNoSize;       // prefix included; kNoSize where the set cannot be packed
};

std::size_t packed_tail_bytes(std::size_t count, unsigned width) { return (count * width + 7) / 8; }

// Fills `plan` for indices below n; checks on the way that they are strictly ascending and below n
// (InvalidArgument).
void plan_packed(std::span<const std::uint32_t> indices, std::uint32_t n, PackedPlan& plan) {
  const std::size_t count = indices.size();
  plan.gaps.resize(count);
  plan.widths.clear();
  bool packable = n <= kMaxPackedN;
  std::size_t bytes = kPrefixBytes;
  for (std::size_t at = 0; at < count; at += kBlockGaps) {
    const std::size_t m = std::min(kBlockGaps, count - at);
    bool ascending = true;
    const std::uint32_t any = kernels::gaps_of(indices.data() + at, m, at == 0 ? 0xffffffffu : indices[at - 1],
                                               plan.gaps.data() + at, &ascending);
    if (!ascending) {
      for (std::size_t i = at; i < at + m; ++i) {
        if (i > 0 && indices[i] <= indices[i - 1]) refuse_index(indices[i], i, n);
      }
    }
    const auto width = static_cast<unsigned>(std::bit_width(any));
    packable = packable && width <= kMaxPackedWidth;
    plan.widths.push_back(static_cast<std::uint8_t>(width));
    bytes += 1 + (m == kBlockGaps ? 4 * kernels::kBlockLanes * width : packed_tail_bytes(m, width));
  }
  if (count > 0 && indices[count - 1] >= n) refuse_index(indices[count - 1], count - 1, n);
  plan.bytes = packable ? bytes : kNoSize;
}

PackedPlan& scratch_plan() {
  thread_local PackedPlan plan;
  return plan;
}

// Appends the packed coding's body (after the prefix) of a planned set.
void append_packed(const PackedPlan& plan, std::vector<std::byte>& out) {
  const std::size_t count = plan.gaps.size();
  const std::size_t at = out.size();
  out.resize(at + plan.bytes - kPrefixBytes + 8, std::byte{0});  // 8: the bit writer's slack
  std::byte* p = out.data() + at;
  for (std::size_t block = 0, first = 0; first < count; ++block, first += kBlockGaps) {
    const unsigned width = plan.widths[block];
    *p++ = static_cast<std::byte>(width);
    const std::size_t m = std::min(kBlockGaps, count - first);
    if (m == kBlockGaps) {
      std::uint32_t words[kernels::kBlockLanes * kMaxPackedWidth];
      kernels::pack_block(plan.gaps.data() + first, width, words);
      const std::size_t bytes = 4 * kernels::kBlockLanes * width;
      std::memcpy(p, words, bytes);
      p += bytes;
    } else {
      BitWriter writer(p);
      for (std::size_t j = 0; j < m; ++j) writer.put(plan.gaps[first + j], width);
      writer.finish();
      p += packed_tail_bytes(m, width);
    }
  }
  out.resize(at + plan.bytes - kPrefixBytes);
}

void decode_packed(std::span<const std::byte> body, std::uint32_t n, std::span<std::uint32_t> out) {
  if (n > kMaxPackedN) bad("packed indices for n = " + std::to_string(n) + ", above 2^31");
  const std::size_t count = out.size();
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  const auto* end = p + body.size();
  std::uint32_t previous = 0xffffffffu;  // the first gap is the first index
  for (std::size_t first = 0; first < count; first += kBlockGaps) {
    if (p == end) bad("the packed blocks end before " + std::to_string(count) + " indices");
    const unsigned width = *p++;
    if (width > kMaxPackedWidth) bad("a packed block of width " + std::to_string(width));
    const std::size_t m = std::min(kBlockGaps, count - first);
    const std::size_t bytes = m == kBlockGaps ? 4 * kernels::kBlockLanes * width : packed_tail_bytes(m, width);
    if (static_cast<std::size_t>(end - p) < bytes) bad("a packed block runs past the end of the message");
    std::uint32_t any = 0;
    if (m == kBlockGaps) {
      bool in_range = true;
      any = kernels::unpack_block(p, width, previous, n, out.data() + first, &in_range);
      if (!in_range) {
        for (std::size_t i = first; i < first + m; ++i) {
          if (out[i] >= n || (i > 0 && out[i] <= out[i - 1])) {
            bad("index at " + std::to_string(i) + " is not below n = " + std::to_string(n));
          }
        }
      }
    } else {
      BitReader reader({reinterpret_cast<const std::byte*>(p), bytes});
      std::uint64_t next = static_cast<std::uint64_t>(previous) + 1;
      if (previous == 0xffffffffu) next = 0;
      const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
      for (std::size_t j = 0; j < m; ++j) {
        if (reader.available() < width) reader.refill();
        const std::uint64_t gap = reader.buffer() & mask;
        reader.consume(width);
        any |= static_cast<std::uint32_t>(gap);
        const std::uint64_t index = next + gap;
        if (index >= n) bad("index " + std::to_string(index) + " at " + std::to_string(first + j) + " is not below n = " + std::to_string(n));
        out[first + j] = static_cast<std::uint32_t>(index);
        next = index + 1;
      }
      reader.refill();
      if (reader.left() >= 8) bad("bytes after the last packed index");
      if (reader.left() > 0 && (reader.buffer() & ((std::uint64_t{1} << reader.left()) - 1)) != 0) {
        bad("the padding after the last packed index is not zero");
      }
    }
    // One byte string per set: every block in the smallest width that holds its gaps.
    if (static_cast<unsigned>(std::bit_width(any)) != width) {
      bad("a packed block of width " + std::to_string(width) + " whose gaps need " +
          std::to_string(std::bit_width(any)));
    }
    previous = out[first + m - 1];
    p += bytes;
  }
  if (p != end) bad(std::to_string(end - p) + " bytes after the last packed block");
}

void decode_rice(std::span<const std::byte> code, unsigned b, std::uint32_t n, std::span<std::uint32_t> out) {
  BitReader reader(code);
  std::uint64_t next = 0;
  const std::uint64_t low_mask = (std::uint64_t{1} << b) - 1;
  // A refill leaves at least 56 bits; codes at low density take about 12, so most codes are read
  // without one.
  const unsigned refill_below = std::min(32u + b, 56u);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (reader.available() < refill_below) reader.refill();
    std::uint64_t quotient, low;
    const auto run = static_cast<unsigned>(std::countr_one(reader.buffer()));
    if (run + 1 + b <= reader.available()) [[likely]] {
      // The whole code (unary part, its terminating 0, the low bits) is in the buffer.
      quotient = run;
      low = (reader.buffer() >> (run + 1)) & low_mask;
      reader.consume(run + 1 + b);
    } else {
      quotient = 0;
      for (;;) {  // the unary part, across refills
        const auto ones = static_cast<unsigned>(std::countr_one(reader.buffer()));
        if (ones < reader.available()) {
          quotient += ones;
          reader.consume(ones + 1);
          break;
        }
        if (reader.exhausted()) bad("the code runs past the end of the message");
        quotient += reader.available();
        reader.consume(reader.available());
        if (quotient > n) bad("a gap runs past n");
        reader.refill();
      }
      if (reader.available() < b) {
        reader.refill();
        if (reader.available() < b) bad("the code runs past the end of the message");
      }
      low = reader.buffer() & low_mask;
      reader.consume(b);
    }
    const std::uint64_t index = next + ((quotient << b) | low);
    if (index >= n) [[unlikely]] {
      bad("index " + std::to_string(index) + " at " + std::to_string(i) + " is not below n = " + std::to_string(n));
    }
    out[i] = static_cast<std::uint32_t>(index);
    next = index + 1;
  }
  // Only zero padding up to the end of the last byte may follow.
  reader.refill();
  if (reader.left() >= 8) bad(std::to_string(reader.left() / 8) + " bytes after the last index");
  if (reader.left() > 0 && (reader.buffer() & ((std::uint64_t{1} << reader.left()) - 1)) != 0) {
    bad("the padding after the last index is not zero");
  }
}

}  // namespace

unsigned rice_parameter(std::size_t count, std::uint32_t n) {
  if (count == 0) return 0;
  const double mean_gap = static_cast<double>(n) / static_cast<double>(count);
  const double b = std::round(std::log2(std::max(1.0, std::log(2.0) * mean_gap)));
  return static_cast<unsigned>(std::clamp(b, 0.0, static_cast<double>(kMaxRice)));
}

double expected_encoded_bytes(std::size_t count, std::uint32_t n) {
  const auto c = static_cast<double>(count);
  const double raw = 4.0 * c;
  const double bitmap = std::ceil(static_cast<double>(n) / 8.0);
  double rice = raw;
  if (count > 0 && count <= n) {
    const unsigned b = rice_parameter(count, n);
    const double q = std::pow(1.0 - c / static_cast<double>(n), std::ldexp(1.0, static_cast<int>(b)));
    rice = std::ceil(c * (b + 1.0 + q / (1.0 - q)) / 8.0);
  }
  (void)rice;  // the encoder does not choose it (index_codec.hpp)
  double packed = raw;
  if (count > 0 && count <= n && n <= kMaxPackedN) {
    // Gaps of a uniformly random set are about geometric: P(gap >= 2^w) = (1 - p)^(2^w). A block of
    // m gaps takes the width of its largest, E[width] = sum over w of P(largest >= 2^w).
    const double p = c / static_cast<double>(n);
    auto expected_width = [p](double m) {
      double width = 0.0;
      for (int w = 0; w < static_cast<int>(kMaxPackedWidth); ++w) {
        const double at_least = std::pow(1.0 - p, std::ldexp(1.0, w));
        width += 1.0 - std::pow(1.0 - at_least, m);
      }
      return width;
    };
    const double blocks = std::floor(c / static_cast<double>(kBlockGaps));
    const double tail = c - blocks * static_cast<double>(kBlockGaps);
    packed = blocks * (1.0 + 4.0 * kernels::kBlockLanes * expected_width(static_cast<double>(kBlockGaps)));
    if (tail > 0) packed += 1.0 + std::ceil(tail * expected_width(tail) / 8.0);
  }
  return static_cast<double>(kPrefixBytes) + std::min({raw, packed, bitmap});
}

std::size_t Sizes::best_bytes() const {
  return best == Coding::raw ? raw : best == Coding::packed ? packed : best == Coding::rice ? rice : bitmap;
}

Sizes encoded_sizes(std::span<const std::uint32_t> indices, std::uint32_t n) {
  Sizes s;
  s.raw = kPrefixBytes + 4 * indices.size();
  s.rice = kPrefixBytes + static_cast<std::size_t>((checked_rice_bits(indices, n, rice_parameter(indices.size(), n)) + 7) / 8);
  s.bitmap = kPrefixBytes + (static_cast<std::size_t>(n) + 7) / 8;
  PackedPlan& plan = scratch_plan();
  plan_packed(indices, n, plan);
  s.packed = plan.bytes;
  s.best = smallest(s.raw, s.packed, s.bitmap);
  return s;
}

namespace {

// Encodes indices already checked, in that coding; returns the bytes appended.
std::size_t encode_checked(Coding coding, std::span<const std::uint32_t> indices, std::uint32_t n,
                           std::vector<std::byte>& out) {
  const std::size_t start = out.size();
  const unsigned b = coding == Coding::rice ? rice_parameter(indices.size(), n) : 0;
  out.push_back(static_cast<std::byte>(coding));
  out.push_back(static_cast<std::byte>(b));
  switch (coding) {
    case Coding::raw: {
      const std::size_t at = out.size();
      out.resize(at + 4 * indices.size());
      if (!indices.empty()) std::memcpy(out.data() + at, indices.data(), 4 * indices.size());  // data() may be null
      break;
    }
    case Coding::rice:
      append_rice(indices, n, b, out);
      break;
    case Coding::packed: {
      PackedPlan& plan = scratch_plan();
      plan_packed(indices, n, plan);
      if (plan.bytes == kNoSize) {
        throw InvalidArgument("these indices cannot be packed (a gap of 2^31 or more, or n above 2^31)");
      }
      append_packed(plan, out);
      break;
    }
    case Coding::bitmap: {
      const std::size_t at = out.size();
      out.resize(at + (static_cast<std::size_t>(n) + 7) / 8, std::byte{0});
      for (const std::uint32_t index : indices) out[at + index / 8] |= static_cast<std::byte>(1u << (index % 8));
      break;
    }
    default:
      throw InvalidArgument("unknown index coding " + std::to_string(static_cast<int>(coding)));
  }
  return out.size() - start;
}

}  // namespace

std::size_t encode_as(Coding coding, std::span<const std::uint32_t> indices, std::uint32_t n,
                      std::vector<std::byte>& out) {
  encoded_sizes(indices, n);  // checks the indices
  return encode_checked(coding, indices, n, out);
}

std::size_t encode(std::span<const std::uint32_t> indices, std::uint32_t n, std::vector<std::byte>& out) {
  // One pass over the indices (gaps, widths and the checks), then the smallest coding is written.
  PackedPlan& plan = scratch_plan();
  plan_packed(indices, n, plan);
  const std::size_t raw = kPrefixBytes + 4 * indices.size();
  const std::size_t bitmap = kPrefixBytes + (static_cast<std::size_t>(n) + 7) / 8;
  const Coding best = smallest(raw, plan.bytes, bitmap);
  if (best == Coding::packed) {
    const std::size_t at = out.size();
    out.push_back(static_cast<std::byte>(Coding::packed));
    out.push_back(std::byte{0});
    append_packed(plan, out);
    return out.size() - at;
  }
  return encode_checked(best, indices, n, out);
}

namespace {

// The encoder always picks the smallest of raw, packed and bitmap (raw on a tie with packed, either
// on a tie with the bitmap); a decoder that accepted any other keeps a message from having one byte
// string, which the wire fuzzer relies on. Raw and bitmap sets pay a pass to size their packing.
void require_canonical(Coding coding, std::size_t bytes, std::span<const std::uint32_t> indices, std::uint32_t n) {
  if (coding == Coding::rice) bad("Rice coding, which the encoder does not choose (it packs the gaps)");
  const std::size_t raw = kPrefixBytes + 4 * indices.size();
  const std::size_t bitmap = kPrefixBytes + (static_cast<std::size_t>(n) + 7) / 8;
  std::size_t packed = bytes;
  if (coding != Coding::packed) {
    PackedPlan& plan = scratch_plan();
    plan_packed(indices, n, plan);
    packed = plan.bytes;
  }
  if (smallest(raw, packed, bitmap) != coding) {
    bad(std::string(coding == Coding::raw ? "raw indices" : coding == Coding::packed ? "packed indices" : "a bitmap") +
        " where the encoder chooses another coding");
  }
}

}  // namespace

void decode(std::span<const std::byte> bytes, std::uint32_t n, std::span<std::uint32_t> out) {
  decode_any(bytes, n, out);
  require_canonical(static_cast<Coding>(bytes[0]), bytes.size(), out, n);
}

void decode_any(std::span<const std::byte> bytes, std::uint32_t n, std::span<std::uint32_t> out) {
  if (bytes.size() < kPrefixBytes) bad("shorter than its 2-byte prefix");
  const auto coding = static_cast<std::uint8_t>(bytes[0]);
  const auto b = static_cast<unsigned>(bytes[1]);
  const std::span<const std::byte> body = bytes.subspan(kPrefixBytes);
  switch (static_cast<Coding>(coding)) {
    case Coding::raw: {
      if (b != 0) bad("raw coding with a Rice parameter");
      if (body.size() != 4 * out.size()) {
        bad(std::to_string(body.size()) + " bytes for " + std::to_string(out.size()) + " raw indices");
      }
      if (!body.empty()) std::memcpy(out.data(), body.data(), body.size());
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i] >= n) bad("index " + std::to_string(out[i]) + " at " + std::to_string(i) + " is not below n = " + std::to_string(n));
        if (i > 0 && out[i] <= out[i - 1]) bad("indices not strictly ascending at " + std::to_string(i));
      }
      return;
    }
    case Coding::rice:
      if (b > kMaxRice) bad("Rice parameter " + std::to_string(b) + " above " + std::to_string(kMaxRice));
      decode_rice(body, b, n, out);
      return;
    case Coding::packed:
      if (b != 0) bad("packed coding with a Rice parameter");
      decode_packed(body, n, out);
      return;
    case Coding::bitmap: {
      if (b != 0) bad("bitmap coding with a Rice parameter");
      if (body.size() != (static_cast<std::size_t>(n) + 7) / 8) {
        bad("a bitmap of " + std::to_string(body.size()) + " bytes for n = " + std::to_string(n));
      }
      std::size_t found = 0;
      for (std::size_t byte = 0; byte < body.size(); ++byte) {
        auto bits = static_cast<unsigned>(body[byte]);
        while (bits) {
          const auto index = static_cast<std::uint64_t>(8 * byte + static_cast<unsigned>(std::countr_zero(bits)));
          if (index >= n) bad("a bitmap bit at " + std::to_string(index) + ", not below n = " + std::to_string(n));
          if (found == out.size()) bad("a bitmap of more than " + std::to_string(out.size()) + " indices");
          out[found++] = static_cast<std::uint32_t>(index);
          bits &= bits - 1;
        }
      }
      if (found != out.size()) bad("a bitmap of " + std::to_string(found) + " indices, " + std::to_string(out.size()) + " expected");
      return;
    }
  }
  bad("unknown coding " + std::to_string(coding));
}

}  // namespace sparsgd::index_codec
