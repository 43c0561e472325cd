// Compressed index sets (core/index_codec.hpp): every coding against a plain bit-by-bit reference
// encoder, round trips over sizes, densities and shapes of sets, the sizes the codec promises,
// and malformed encodings refused without reading outside them.

#include "sparsgd/core/index_codec.hpp"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <numeric>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::index_codec {
namespace {

std::vector<std::uint32_t> random_set(std::uint32_t n, std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> all;
  if (count * 4 > n) {
    all.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(count);
  } else {
    std::vector<bool> taken(n);
    std::uniform_int_distribution<std::uint32_t> pick(0, n - 1);
    while (all.size() < count) {
      const std::uint32_t i = pick(rng);
      if (!taken[i]) {
        taken[i] = true;
        all.push_back(i);
      }
    }
  }
  std::sort(all.begin(), all.end());
  return all;
}

// The Rice code written one bit at a time, as plainly as possible.
std::vector<std::byte> reference_rice(const std::vector<std::uint32_t>& indices, unsigned b) {
  std::vector<bool> bits;
  std::uint32_t next = 0;
  for (const std::uint32_t index : indices) {
    const std::uint32_t gap = index - next;
    for (std::uint32_t q = 0; q < (gap >> b); ++q) bits.push_back(true);
    bits.push_back(false);
    for (unsigned i = 0; i < b; ++i) bits.push_back(((gap >> i) & 1u) != 0);
    next = index + 1;
  }
  std::vector<std::byte> out(2 + (bits.size() + 7) / 8, std::byte{0});
  out[0] = static_cast<std::byte>(Coding::rice);
  out[1] = static_cast<std::byte>(b);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) out[2 + i / 8] |= static_cast<std::byte>(1u << (i % 8));
  }
  return out;
}

// The packed coding written one bit at a time: gaps in blocks of 512, lane l of a block holding
// gaps l, l + 16, ... in its own stream of 32-bit words (word q of lane l at word 16 q + l); a last
// shorter block as one stream, least significant bit first.
std::vector<std::byte> reference_packed(const std::vector<std::uint32_t>& indices) {
  std::vector<std::byte> out{static_cast<std::byte>(Coding::packed), std::byte{0}};
  std::vector<std::uint32_t> gaps;
  std::uint32_t next = 0;
  for (const std::uint32_t index : indices) {
    gaps.push_back(index - next);
    next = index + 1;
  }
  for (std::size_t first = 0; first < gaps.size(); first += 512) {
    const std::size_t m = std::min<std::size_t>(512, gaps.size() - first);
    unsigned width = 0;
    for (std::size_t j = 0; j < m; ++j) {
      while (width < 32 && (gaps[first + j] >> width) != 0) ++width;
    }
    out.push_back(static_cast<std::byte>(width));
    if (m == 512) {
      std::vector<std::uint32_t> words(16 * width, 0);
      for (std::size_t j = 0; j < 512; ++j) {
        for (unsigned b = 0; b < width; ++b) {
          const std::size_t bit = (j / 16) * width + b;  // in lane j % 16's stream
          if ((gaps[first + j] >> b) & 1u) words[16 * (bit / 32) + j % 16] |= 1u << (bit % 32);
        }
      }
      for (const std::uint32_t w : words) {
        for (int byte = 0; byte < 4; ++byte) out.push_back(static_cast<std::byte>((w >> (8 * byte)) & 0xff));
      }
    } else {
      std::vector<bool> bits;
      for (std::size_t j = 0; j < m; ++j) {
        for (unsigned b = 0; b < width; ++b) bits.push_back(((gaps[first + j] >> b) & 1u) != 0);
      }
      const std::size_t at = out.size();
      out.resize(at + (bits.size() + 7) / 8, std::byte{0});
      for (std::size_t i = 0; i < bits.size(); ++i) {
        if (bits[i]) out[at + i / 8] |= static_cast<std::byte>(1u << (i % 8));
      }
    }
  }
  return out;
}

// Any coding (encode_as may pick one that is not the smallest).
std::vector<std::uint32_t> decoded(const std::vector<std::byte>& bytes, std::uint32_t n, std::size_t count) {
  std::vector<std::uint32_t> out(count);
  decode_any(bytes, n, out);
  return out;
}

struct Shape {
  std::uint32_t n;
  std::size_t count;
};

TEST(IndexCodec, EveryCodingRoundTripsAndRiceMatchesTheReference) {
  const Shape shapes[] = {{1, 0}, {1, 1}, {2, 1}, {2, 2}, {7, 3}, {64, 64}, {65, 1}, {1000, 1}, {1000, 10},
                          {1000, 500}, {1000, 999}, {100003, 100}, {100003, 1000}, {1u << 20, 1049},
                          {4000000, 4000}, {4294967295u, 3}};
  for (const Shape& shape : shapes) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      const auto set = random_set(std::min<std::uint32_t>(shape.n, 1u << 24), shape.count, seed);
      std::vector<std::uint32_t> indices = set;
      if (shape.n > (1u << 24) && !indices.empty()) indices.back() = shape.n - 1;  // the largest index there is
      const std::string where = "n = " + std::to_string(shape.n) + ", count = " + std::to_string(shape.count) +
                                ", seed = " + std::to_string(seed);
      const Sizes sizes = encoded_sizes(indices, shape.n);
      for (const Coding coding : {Coding::raw, Coding::rice, Coding::bitmap, Coding::packed}) {
        if (coding == Coding::bitmap && shape.n > (1u << 24)) continue;  // half a gigabyte
        if (coding == Coding::packed && sizes.packed == static_cast<std::size_t>(-1)) {
          std::vector<std::byte> refused;
          EXPECT_THROW(encode_as(coding, indices, shape.n, refused), InvalidArgument) << where;
          continue;
        }
        std::vector<std::byte> bytes{std::byte{0x55}};  // encode appends
        const std::size_t written = encode_as(coding, indices, shape.n, bytes);
        bytes.erase(bytes.begin());
        ASSERT_EQ(written, bytes.size()) << where;
        const std::size_t promised = coding == Coding::raw      ? sizes.raw
                                     : coding == Coding::rice   ? sizes.rice
                                     : coding == Coding::packed ? sizes.packed
                                                                : sizes.bitmap;
        ASSERT_EQ(bytes.size(), promised) << where << ", coding " << static_cast<int>(coding);
        if (coding == Coding::rice) {
          ASSERT_EQ(bytes, reference_rice(indices, rice_parameter(indices.size(), shape.n))) << where;
        }
        if (coding == Coding::packed) {
          ASSERT_EQ(bytes, reference_packed(indices)) << where;
        }
        ASSERT_EQ(decoded(bytes, shape.n, indices.size()), indices) << where << ", coding " << static_cast<int>(coding);
      }
      std::vector<std::byte> best;
      encode(indices, shape.n, best);
      EXPECT_EQ(best.size(), sizes.best_bytes()) << where;
      EXPECT_LE(best.size(), std::min({sizes.raw, sizes.packed, sizes.bitmap})) << where;
      EXPECT_EQ(decoded(best, shape.n, indices.size()), indices) << where;
    }
  }
}

// Gaps of every shape: adjacent runs (gap 0), one huge gap among small ones, the first index far in.
TEST(IndexCodec, AwkwardGapsRoundTrip) {
  const std::uint32_t n = 1u << 22;
  std::vector<std::vector<std::uint32_t>> sets;
  std::vector<std::uint32_t> run(5000);
  for (std::uint32_t i = 0; i < run.size(); ++i) run[i] = 100000 + i;
  sets.push_back(run);
  std::vector<std::uint32_t> huge_gap = {0, 1, 2, 3, n - 2, n - 1};
  sets.push_back(huge_gap);
  sets.push_back({n - 1});
  std::vector<std::uint32_t> mixed;
  for (std::uint32_t i = 0; i < 3000; ++i) mixed.push_back(i * (i % 7 == 0 ? 1000u : 3u));
  std::sort(mixed.begin(), mixed.end());
  mixed.erase(std::unique(mixed.begin(), mixed.end()), mixed.end());
  sets.push_back(mixed);
  for (const auto& set : sets) {
    for (const Coding coding : {Coding::raw, Coding::rice, Coding::bitmap, Coding::packed}) {
      std::vector<std::byte> bytes;
      encode_as(coding, set, n, bytes);
      ASSERT_EQ(decoded(bytes, n, set.size()), set) << "coding " << static_cast<int>(coding) << ", " << set.size();
      if (coding == Coding::packed) {
        ASSERT_EQ(bytes, reference_packed(set));
      }
    }
  }
}

// What the design asks of the codec: at density 0.001 (n = 25M, k = 25,000) at most 5.75 bytes a
// pair with float32 values, i.e. 14 bits an index, against the entropy of a k-subset of n,
// log2(e n / k) bits an index (about 11.4), which the Rice code (not chosen: slow) comes within
// half a bit of.
TEST(IndexCodec, SizeNearTheEntropyAtLowDensity) {
  const std::uint32_t n = 25'000'000;
  const std::size_t k = 25'000;
  const auto set = random_set(n, k, 9);
  const Sizes sizes = encoded_sizes(set, n);
  EXPECT_EQ(sizes.best, Coding::packed);
  const double entropy = std::log2(std::exp(1.0) * n / k);
  const double packed_bits = 8.0 * static_cast<double>(sizes.packed - kPrefixBytes) / k;
  EXPECT_LE(4.0 + packed_bits / 8.0, 5.75) << packed_bits << " bits an index";
  EXPECT_GT(packed_bits, entropy);
  const double bits_per_index = 8.0 * static_cast<double>(sizes.rice - kPrefixBytes) / k;
  EXPECT_LT(bits_per_index, entropy + 0.5) << bits_per_index << " bits an index, entropy " << entropy;
  EXPECT_GT(bits_per_index, entropy - 0.5);
  // Dense sets: Rice with b = 0 is a run-length form of the bitmap's bits, never larger than it.
  for (const std::size_t count : {300, 600, 900, 1000}) {
    const Sizes dense = encoded_sizes(random_set(1000, count, 1), 1000);
    EXPECT_LE(dense.best_bytes(), dense.bitmap) << count;
    EXPECT_LE(dense.best_bytes(), 2 + 1000 / 8) << count;
  }
}

TEST(IndexCodec, BadInputToTheEncoderIsRefused) {
  std::vector<std::byte> out;
  const std::vector<std::uint32_t> beyond = {5, 10};
  const std::vector<std::uint32_t> descending = {5, 3};
  const std::vector<std::uint32_t> repeated = {5, 5};
  EXPECT_THROW(encode(beyond, 10, out), InvalidArgument);
  EXPECT_THROW(encode(descending, 10, out), InvalidArgument);
  EXPECT_THROW(encode(repeated, 10, out), InvalidArgument);
}

void expect_refused(const std::vector<std::byte>& bytes, std::uint32_t n, std::size_t count, const std::string& what,
                    const std::string& why) {
  std::vector<std::uint32_t> out(count);
  try {
    decode(bytes, n, out);
    ADD_FAILURE() << what << ": accepted";
  } catch (const wire::WireError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << what << ": " << e.what();
  }
}

TEST(IndexCodec, MalformedEncodingsAreRefused) {
  const std::uint32_t n = 100000;
  const auto set = random_set(n, 300, 4);
  std::vector<std::byte> rice, raw, bitmap;
  encode_as(Coding::rice, set, n, rice);
  encode_as(Coding::raw, set, n, raw);
  encode_as(Coding::bitmap, set, n, bitmap);

  expect_refused({}, n, 300, "empty", "prefix");
  expect_refused({std::byte{7}, std::byte{0}}, n, 0, "unknown coding", "unknown coding 7");
  auto bad_b = rice;
  bad_b[1] = std::byte{40};
  expect_refused(bad_b, n, 300, "Rice parameter 40", "Rice parameter 40");
  auto truncated = rice;
  truncated.resize(truncated.size() - 5);
  expect_refused(truncated, n, 300, "truncated Rice code", "past the end");
  auto trailing = rice;
  trailing.push_back(std::byte{0});
  expect_refused(trailing, n, 300, "a byte after the code", "after the last index");
  expect_refused(rice, n, 299, "one index fewer expected", "after the last index");
  expect_refused(rice, n, 301, "one index more expected", "past the end");
  expect_refused(rice, set.back(), 300, "n too small for the last index", "not below n");
  auto ones = rice;
  std::fill(ones.begin() + 2, ones.end(), std::byte{0xff});
  expect_refused(ones, n, 300, "all ones", "");
  auto raw_descending = raw;
  std::swap_ranges(raw_descending.begin() + 2, raw_descending.begin() + 6, raw_descending.begin() + 6);
  expect_refused(raw_descending, n, 300, "raw, descending", "ascending");
  expect_refused(raw, set.back(), 300, "raw, index beyond n", "not below n");
  auto raw_short = raw;
  raw_short.pop_back();
  expect_refused(raw_short, n, 300, "raw, short", "raw indices");
  expect_refused(bitmap, n, 301, "bitmap, count off", "a bitmap of 300 indices");
  expect_refused(bitmap, n, 299, "bitmap, count off", "more than 299");
  auto bitmap_short = bitmap;
  bitmap_short.pop_back();
  expect_refused(bitmap_short, n, 300, "bitmap, short", "bytes for n");
  std::vector<std::byte> tail_bit;
  encode_as(Coding::bitmap, std::vector<std::uint32_t>{0}, 9, tail_bit);
  tail_bit.back() |= std::byte{0x80};  // bit 15: beyond n = 9
  expect_refused(tail_bit, 9, 2, "bitmap bit beyond n", "not below n");
  // The packed coding: a set of 1,300 (two full blocks and a tail of 276).
  const auto many = random_set(n * 10, 1300, 5);
  std::vector<std::byte> packed;
  encode_as(Coding::packed, many, n * 10, packed);
  ASSERT_EQ(decoded(packed, n * 10, 1300), many);
  auto wide = packed;
  wide[2] = std::byte{32};
  expect_refused(wide, n * 10, 1300, "packed width 32", "width 32");
  auto cut = packed;
  cut.resize(100);
  expect_refused(cut, n * 10, 1300, "packed, cut in a block", "past the end");
  auto extra = packed;
  extra.push_back(std::byte{0});
  expect_refused(extra, n * 10, 1300, "packed, a byte after it", "after the last packed");
  expect_refused(packed, n * 10, 1299, "packed, one index fewer", "");
  expect_refused(packed, n * 10, 1301, "packed, one index more", "");
  expect_refused(packed, many[600], 1300, "packed, an index of the second block beyond n", "not below n");
  expect_refused(packed, many.back(), 1300, "packed, the tail's last index beyond n", "not below n");
  expect_refused(packed, 3u << 30, 1300, "packed, n above 2^31", "above 2^31");
  // A block one bit wider than its gaps need is another byte string for the same set.
  std::vector<std::uint32_t> small_gaps(512);
  for (std::uint32_t i = 0; i < 512; ++i) small_gaps[i] = 2 * i;  // gaps of 1 (first: 0): width 1
  std::vector<std::byte> narrow;
  encode_as(Coding::packed, small_gaps, 2000, narrow);
  ASSERT_EQ(narrow.size(), 2u + 1 + 64);
  std::vector<std::byte> widened = {narrow[0], narrow[1], std::byte{2}};
  for (int row_pair = 0; row_pair < 128; ++row_pair) widened.push_back(std::byte{0});
  for (std::size_t lane = 0; lane < 16; ++lane) {  // gap 1 in every row but lane 0's first: 2 bits each
    for (std::size_t row = 0; row < 32; ++row) {
      if (lane == 0 && row == 0) continue;
      const std::size_t bit = row * 2;
      widened[3 + 4 * (16 * (bit / 32) + lane) + (bit % 32) / 8] |= static_cast<std::byte>(1u << (bit % 8));
    }
  }
  ASSERT_EQ(decoded(narrow, 2000, 512), small_gaps);
  expect_refused(widened, 2000, 512, "a block wider than its gaps", "need 1");
  auto tail_padding = packed;
  tail_padding.back() |= std::byte{0x80};
  const std::size_t tail_bits = 276 * static_cast<unsigned>(tail_padding[2 + 2 * (1 + 64 * static_cast<unsigned>(packed[2]))]);
  if (tail_bits % 8 != 0) expect_refused(tail_padding, n * 10, 1300, "packed tail padding", "padding");
  // Non-zero padding after the last Rice code.
  std::vector<std::byte> padded;
  encode_as(Coding::rice, std::vector<std::uint32_t>{3}, 1000, padded);
  padded.back() |= std::byte{0x80};
  expect_refused(padded, 1000, 1, "padding", "padding");
}

// The cost model's expected size against the mean over random sets, dense to very sparse.
TEST(IndexCodec, ExpectedSizeMatchesRandomSets) {
  std::mt19937 rng(3);
  for (const auto& [n, count] : std::vector<std::pair<std::uint32_t, std::size_t>>{
           {1000000, 1000}, {1000000, 10000}, {100000, 25000}, {10000, 5000}, {1000, 990}, {50000, 3}}) {
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    double total = 0;
    const int trials = 20;
    for (int t = 0; t < trials; ++t) {
      std::vector<std::uint32_t> set;
      std::sample(all.begin(), all.end(), std::back_inserter(set), count, rng);
      total += static_cast<double>(encoded_sizes(set, n).best_bytes());
    }
    const double expected = expected_encoded_bytes(count, n);
    EXPECT_NEAR(total / trials, expected, 0.02 * expected + 1) << "n = " << n << ", count = " << count;
  }
}

// decode() accepts only what encode() writes: the smallest of raw, packed and bitmap, never rice.
TEST(IndexCodec, OnlyTheEncodersChoiceIsAccepted) {
  std::vector<std::uint32_t> sparse;  // mean gap 100: packed is smallest
  for (std::uint32_t i = 0; i < 50; ++i) sparse.push_back(i * 100 + i % 7);
  const std::uint32_t n = 5000;
  ASSERT_EQ(encoded_sizes(sparse, n).best, Coding::packed);
  for (const Coding other : {Coding::raw, Coding::bitmap, Coding::rice}) {
    std::vector<std::byte> bytes;
    encode_as(other, sparse, n, bytes);
    EXPECT_EQ(decoded(bytes, n, sparse.size()), sparse);
    expect_refused(bytes, n, sparse.size(), "not the smallest coding", "coding");
  }
  std::vector<std::byte> bytes;
  encode(sparse, n, bytes);
  EXPECT_EQ(bytes, reference_packed(sparse));
  // Runs of 4 then gaps of 5 at density 4/9: packing takes 3 bits an index, the bitmap 2.25, so
  // the bitmap is smallest and packed or raw are refused.
  std::vector<std::uint32_t> dense;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    if (i % 9 < 4) dense.push_back(i);
  }
  ASSERT_EQ(encoded_sizes(dense, 1000).best, Coding::bitmap);
  for (const Coding other : {Coding::raw, Coding::packed}) {
    std::vector<std::byte> b;
    encode_as(other, dense, 1000, b);
    expect_refused(b, 1000, dense.size(), "a dense set not as a bitmap", "coding");
  }
}

// Random bytes: every outcome is a decoded set that is valid, or a WireError; nothing else (the
// sanitizer build runs this too, and would catch a read outside the span).
TEST(IndexCodec, RandomBytesNeverMisbehave) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::size_t size = rng() % 40;
    std::vector<std::byte> bytes(size);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    if (size > 0) bytes[0] = static_cast<std::byte>(rng() % 4);
    if (size > 1 && rng() % 2) bytes[1] = static_cast<std::byte>(rng() % 12);
    const std::uint32_t n = 1 + rng() % 500;
    const std::size_t count = rng() % 20;
    std::vector<std::uint32_t> out(count);
    try {
      decode(bytes, n, out);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_LT(out[i], n);
        if (i > 0) {
          ASSERT_GT(out[i], out[i - 1]);
        }
      }
      std::vector<std::byte> again;  // one set, one byte string
      encode(out, n, again);
      ASSERT_EQ(again, bytes);
    } catch (const wire::WireError&) {
    }
  }
}

// Damaged packed sets with full blocks (the vector path), on every SIMD target this machine runs:
// each is a valid set that re-encodes to the same bytes, or a WireError; the undamaged set decodes
// to itself and encodes to the reference's bytes on every target.
TEST(IndexCodec, PackedBlocksOnEveryTargetSurviveDamage) {
  const std::uint32_t n = 3'000'000;
  const auto set = random_set(n, 2100, 21);
  const std::vector<std::byte> reference = reference_packed(set);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    std::vector<std::byte> bytes;
    encode(set, n, bytes);
    ASSERT_EQ(bytes, reference);
    ASSERT_EQ(decoded(bytes, n, set.size()), set);
    std::mt19937 rng(static_cast<std::uint32_t>(target));
    for (int trial = 0; trial < 300; ++trial) {
      auto damaged = bytes;
      for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
        damaged[2 + rng() % (damaged.size() - 2)] ^= static_cast<std::byte>(1u << (rng() % 8));
      }
      std::vector<std::uint32_t> out(set.size());
      try {
        decode(damaged, n, out);
        for (std::size_t i = 0; i < out.size(); ++i) {
          ASSERT_LT(out[i], n);
          if (i > 0) {
            ASSERT_GT(out[i], out[i - 1]);
          }
        }
        std::vector<std::byte> again;
        encode(out, n, again);
        ASSERT_EQ(again, damaged);
      } catch (const wire::WireError&) {
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Long runs of ones (a huge gap's unary part) met at every bit alignment and with every number
// of bytes left to the end: the bit reader must never shift by its full width (the wire fuzzer
// found a 64-bit shift when a byte-wise refill near the end filled all 64 bits).
TEST(IndexCodec, LongUnaryRunsNearTheEndAreReadSafely) {
  const std::uint32_t n = 0xfffffff0u;
  for (unsigned b = 0; b <= 31; ++b) {
    for (std::size_t zeros = 0; zeros <= 17; ++zeros) {
      for (std::size_t ones = 1; ones <= 17; ++ones) {
        std::vector<std::byte> bytes{static_cast<std::byte>(Coding::rice), static_cast<std::byte>(b)};
        bytes.insert(bytes.end(), zeros, std::byte{0x00});
        bytes.insert(bytes.end(), ones, std::byte{0xff});
        for (const std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{200}}) {
          std::vector<std::uint32_t> out(count);
          try {
            decode_any(bytes, n, out);
            for (std::size_t i = 1; i < count; ++i) ASSERT_GT(out[i], out[i - 1]);
          } catch (const wire::WireError&) {
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace sparsgd::index_codec
