#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/wire_kernels.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::wire {
namespace {

const Expectation kExpect{3, 100, 4, 4, 5, "gtopk"};

std::vector<std::byte> message(std::vector<std::uint32_t> idx, std::vector<float> val, std::uint32_t algorithm = 3,
                               std::uint32_t n = 100, std::uint32_t k = 4, std::vector<std::uint8_t> mask = {}) {
  std::vector<std::byte> out;
  encode_sparse(algorithm, n, k, idx, val, mask, out);
  return out;
}

void expect_error(const std::vector<std::byte>& msg, const std::string& fragment, std::size_t mask_bits = SIZE_MAX) {
  SparseVector out;
  std::vector<std::uint8_t> mask;
  try {
    decode_sparse(msg, kExpect, out, mask, mask_bits);
    FAIL() << "expected a WireError mentioning '" << fragment << "'";
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
  }
  // The in-place decoder (mask-less messages) refuses the same messages for the same reason.
  if (mask_bits != SIZE_MAX && mask_bits != 0) return;
  std::vector<std::byte> aligned = msg;  // a vector's own storage is aligned for the in-place view
  try {
    decode_sparse_view(aligned, kExpect);
    FAIL() << "expected decode_sparse_view to throw a WireError mentioning '" << fragment << "'";
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Wire, SparseRoundTripWithMask) {
  const auto msg = message({1, 5, 99}, {1.5f, -2.0f, 0.0f}, 3, 100, 4, {1, 0, 1});
  EXPECT_EQ(msg.size(), sparse_message_bytes(3, 3));
  SparseVector out;
  std::vector<std::uint8_t> mask;
  decode_sparse(msg, kExpect, out, mask, 3);
  EXPECT_EQ(out.dim, 100u);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{1, 5, 99}));
  EXPECT_EQ(out.values, (std::vector<float>{1.5f, -2.0f, 0.0f}));
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 0, 1}));
  EXPECT_EQ(sparse_message_length(msg, kExpect), msg.size());
}

TEST(Wire, InPlaceViewAndPreparedMessage) {
  std::vector<std::byte> out;
  const SparseSlots slots = prepare_sparse(3, 100, 4, 3, out);
  EXPECT_EQ(out.size(), sparse_message_bytes(3));
  const std::uint32_t idx[] = {2, 40, 99};
  const float val[] = {-1.0f, 0.25f, 7.0f};
  for (int i = 0; i < 3; ++i) {
    slots.indices[i] = idx[i];
    slots.values[i] = val[i];
  }
  // Byte for byte what encode_sparse writes.
  EXPECT_EQ(out, message({2, 40, 99}, {-1.0f, 0.25f, 7.0f}));
  const SparseView v = decode_sparse_view(out, kExpect);
  EXPECT_EQ(v.dim, 100u);
  ASSERT_EQ(v.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(v.indices[i], idx[i]);
    EXPECT_EQ(v.values[i], val[i]);
  }
  EXPECT_EQ(static_cast<const void*>(v.indices.data()), static_cast<const void*>(out.data() + kHeaderBytes));
  const SparseView empty = decode_sparse_view(message({}, {}), kExpect);
  EXPECT_EQ(empty.size(), 0u);
}

// The vectorized entry check against a plain loop, with one fault of each kind at every position
// (so at every lane and in the scalar head and tail), for sizes around the vector widths.
TEST(Wire, EntryCheckFindsEveryFaultAtEveryPosition) {
  const std::uint32_t n = 1000;
  auto plain = [&](const std::vector<std::uint32_t>& idx, const std::vector<float>& val) {
    for (std::size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] >= n || !std::isfinite(val[i]) || (i > 0 && idx[i] <= idx[i - 1])) return false;
    }
    return true;
  };
  for (std::size_t count = 0; count <= 70; ++count) {
    std::vector<std::uint32_t> idx(count);
    std::vector<float> val(count);
    for (std::size_t i = 0; i < count; ++i) {
      idx[i] = static_cast<std::uint32_t>(3 * i + 7);
      val[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i);
    }
    ASSERT_TRUE(entries_valid(idx.data(), val.data(), count, n)) << count;
    for (std::size_t at = 0; at < count; ++at) {
      for (int fault = 0; fault < 5; ++fault) {
        auto bad_idx = idx;
        auto bad_val = val;
        switch (fault) {
          case 0: bad_idx[at] = n; break;                                                 // out of range
          case 1: bad_idx[at] = 0xFFFFFFFFu; break;                                       // far out of range
          case 2: bad_idx[at] = at > 0 ? bad_idx[at - 1] : 0; break;                      // repeated
          case 3: bad_val[at] = std::numeric_limits<float>::quiet_NaN(); break;           // NaN
          case 4: bad_val[at] = -std::numeric_limits<float>::infinity(); break;           // Inf
        }
        ASSERT_EQ(entries_valid(bad_idx.data(), bad_val.data(), count, n), plain(bad_idx, bad_val))
            << "count " << count << " fault " << fault << " at " << at;
      }
    }
  }
}

TEST(Wire, EmptyMessage) {
  SparseVector out;
  std::vector<std::uint8_t> mask;
  decode_sparse(message({}, {}), kExpect, out, mask, 0);
  EXPECT_TRUE(out.empty());
}

TEST(Wire, RejectsMalformedSparseMessages) {
  expect_error(message({1, 100}, {1.0f, 2.0f}), "out of range");
  expect_error(message({5, 5}, {1.0f, 2.0f}), "ascending");
  expect_error(message({7, 3}, {1.0f, 2.0f}), "ascending");
  expect_error(message({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}), "exceeds the capacity");
  expect_error(message({1}, {std::numeric_limits<float>::quiet_NaN()}), "non-finite");
  expect_error(message({1}, {std::numeric_limits<float>::infinity()}), "non-finite");
  expect_error(message({1}, {1.0f}, 4), "aggregation algorithm");
  expect_error(message({1}, {1.0f}, 3, 101), "n = 101");
  expect_error(message({1}, {1.0f}, 3, 100, 5), "k = 5");
  expect_error(message({1}, {1.0f}, 3, 100, 4, {1}), "mask of 1 bits", 0);
  auto truncated = message({1, 2}, {1.0f, 2.0f});
  truncated.pop_back();
  expect_error(truncated, "truncated");
  auto overlong = message({1, 2}, {1.0f, 2.0f});
  overlong.push_back(std::byte{0});
  expect_error(overlong, "overlong");
  expect_error(std::vector<std::byte>(7), "shorter than the");
  auto bad_magic = message({1}, {1.0f});
  bad_magic[3] = std::byte{0};
  expect_error(bad_magic, "magic");
  // A count field that claims more than the bytes present, within capacity.
  auto lying = message({1}, {1.0f});
  const std::uint32_t three = 3;
  std::memcpy(lying.data() + 12, &three, 4);
  expect_error(lying, "truncated");
}

// Found by fuzz_wire: the unused bits of the mask's last byte were ignored, so a corrupted byte
// there went unnoticed and two byte strings decoded to the same message.
TEST(Wire, RejectsMaskPaddingBits) {
  auto msg = message({1, 5, 99}, {1.5f, -2.0f, 0.0f}, 3, 100, 4, {1, 0, 1});
  expect_error([&] {
    auto bad = msg;
    bad.back() |= std::byte{0x08};  // bit 3 of a 3-bit mask
    return bad;
  }(), "mask padding bits", 3);
  msg.back() |= std::byte{0x02};  // bit 1 lies inside the mask: another valid mask
  SparseVector out;
  std::vector<std::uint8_t> mask;
  decode_sparse(msg, kExpect, out, mask, 3);
  EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 1, 1}));
  // A mask that fills its last byte has no padding to check.
  const auto full = message({1, 2, 3, 4}, {1, 2, 3, 4}, 3, 100, 4, {1, 1, 1, 1, 1, 1, 1, 1});
  Expectation e = kExpect;
  e.capacity = 8;
  decode_sparse(full, e, out, mask, 8);
  EXPECT_EQ(mask, std::vector<std::uint8_t>(8, 1));
}

// Compressed indices: the same entries, fewer bytes, every decoder, and every way such a message
// can be wrong refused with the sender named.
TEST(Wire, CompressedIndices) {
  Expectation e = kExpect;
  e.n = 100000;
  e.capacity = 50;
  e.index_coding = IndexCoding::compressed;
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (std::uint32_t i = 0; i < 40; ++i) {
    idx.push_back(i * 2500 + (i * 131) % 2500);
    val.push_back(static_cast<float>(i) - 7.25f);
  }
  std::vector<std::byte> msg;
  const SparseSlots slots = encode_sparse(3, e.n, 4, idx, val, {}, msg, IndexCoding::compressed);
  EXPECT_EQ(slots.indices, nullptr);
  ASSERT_NE(slots.values, nullptr);
  EXPECT_EQ(std::vector<float>(slots.values, slots.values + val.size()), val);
  EXPECT_LT(msg.size(), sparse_message_bytes(idx.size()) - 2 * idx.size());  // under 16 bits an index
  EXPECT_LE(msg.size(), max_sparse_message_bytes(idx.size(), 0, IndexCoding::compressed));
  SparseVector out;
  std::vector<std::uint8_t> mask;
  decode_sparse(msg, e, out, mask);
  EXPECT_EQ(out.indices, idx);
  EXPECT_EQ(out.values, val);
  EXPECT_EQ(sparse_message_length(msg, e), msg.size());
  std::vector<std::uint32_t> scratch;
  const SparseView view = decode_sparse_view(msg, e, scratch);
  EXPECT_EQ(std::vector<std::uint32_t>(view.indices.begin(), view.indices.end()), idx);
  EXPECT_EQ(view.values.data(), reinterpret_cast<const float*>(msg.data() + kHeaderBytes + 4));  // in place
  EXPECT_THROW(decode_sparse_view(msg, e), InvalidArgument);  // no room for decoded indices
  // With a mask, back to back with an empty one.
  std::vector<std::uint8_t> bits(idx.size(), 0);
  bits[3] = bits[39] = 1;
  std::vector<std::byte> masked;
  encode_sparse(3, e.n, 4, idx, val, bits, masked, IndexCoding::compressed);
  decode_sparse(masked, e, out, mask, bits.size());
  EXPECT_EQ(mask, bits);
  std::vector<std::byte> empty;
  encode_sparse(3, e.n, 4, {}, {}, {}, empty, IndexCoding::compressed);
  std::vector<std::byte> stream = masked;
  stream.insert(stream.end(), empty.begin(), empty.end());
  EXPECT_EQ(sparse_message_length(stream, e), masked.size());
  EXPECT_EQ(sparse_message_length(std::span(stream).subspan(masked.size()), e), empty.size());

  const auto refused = [&](std::vector<std::byte> bad, const std::string& fragment, const Expectation& expect) {
    try {
      decode_sparse(bad, expect, out, mask);
      ADD_FAILURE() << "accepted; expected '" << fragment << "'";
    } catch (const WireError& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("rank 5"), std::string::npos) << error.what();
    }
  };
  // Ranks that disagree on the coding, either way round.
  refused(msg, "expects raw ones", kExpect);
  refused(message({1, 2}, {1, 2}), "the peer sends raw indices but this rank expects compressed", e);
  // The length of the index code: beyond what raw indices would take, shorter than its prefix,
  // beyond the message.
  std::vector<std::byte> bad = msg;
  const std::uint32_t too_long = 2 + 4 * 40 + 1;
  std::memcpy(bad.data() + kHeaderBytes, &too_long, 4);
  refused(bad, "compressed indices of 163 bytes", e);
  const std::uint32_t too_short = 1;
  std::memcpy(bad.data() + kHeaderBytes, &too_short, 4);
  refused(bad, "compressed indices of 1 bytes", e);
  bad = msg;
  bad.pop_back();
  refused(bad, "truncated", e);
  bad = msg;
  bad.push_back(std::byte{0});
  refused(bad, "overlong", e);
  refused(std::vector<std::byte>(msg.begin(), msg.begin() + kHeaderBytes + 2), "truncated", e);
  // A flipped bit inside the code: a wrong index set (caught by range or order, or by the count)
  // or a clean refusal, never a crash; here the first gap grows past n.
  bad = msg;
  bad[kHeaderBytes + 4 + 4 * 40 + 2] = std::byte{0xff};
  bad[kHeaderBytes + 4 + 4 * 40 + 3] = std::byte{0xff};
  try {
    decode_sparse(bad, e, out, mask);
    // Accepted only as another valid set of 40 ascending indices below n.
    ASSERT_EQ(out.size(), 40u);
    for (std::size_t i = 1; i < out.size(); ++i) ASSERT_LT(out.indices[i - 1], out.indices[i]);
  } catch (const WireError& error) {
    EXPECT_NE(std::string(error.what()).find("compressed indices"), std::string::npos) << error.what();
  }
  // A value that is not finite.
  std::vector<float> nan_values = val;
  nan_values[5] = std::nanf("");
  encode_sparse(3, e.n, 4, idx, nan_values, {}, bad, IndexCoding::compressed);
  refused(bad, "non-finite", e);
}

TEST(Wire, DenseRoundTripAndErrors) {
  std::vector<std::byte> msg;
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  encode_dense(3, 100, 4, values, 0xabcdu, msg);
  std::vector<float> out(3);
  Expectation e = kExpect;
  e.capacity = 10;
  EXPECT_EQ(decode_dense(msg, e, 3, out), 0xabcdu);
  EXPECT_EQ(out, values);
  EXPECT_THROW(decode_dense(msg, e, 4, out), WireError);
  msg.pop_back();
  EXPECT_THROW(decode_dense(msg, e, 3, out), WireError);
  const std::vector<float> bad = {std::nanf("")};
  encode_dense(3, 100, 4, bad, 0, msg);
  EXPECT_THROW(decode_dense(msg, e, 1, out), WireError);
}

}  // namespace
}  // namespace sparsgd::wire
