#include "sparsgd/transport/buffer_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "sparsgd/transport/local.hpp"

namespace sparsgd::transport {
namespace {

using Buffer = BufferPool::Buffer;

TEST(BufferPool, ClassesHoldTheirRequestsAndWasteAtMostAQuarter) {
  std::vector<std::size_t> sizes{1, 2, 255, 256, 257, 319, 320, 321, 511, 512, 513, 640, 641, 4095, 4096, 4097,
                                 1 << 20, (1 << 20) + 1, std::size_t{3} << 30, (std::size_t{1} << 40) - 1};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) sizes.push_back(1 + rng() % (std::size_t{1} << (1 + i % 40)));
  for (const std::size_t bytes : sizes) {
    const std::size_t index = BufferPool::class_for_request(bytes);
    const std::size_t held = BufferPool::class_bytes(index);
    EXPECT_GE(held, bytes) << bytes;
    if (bytes > BufferPool::kSmallestClassBytes) {
      EXPECT_LE(held - bytes, bytes / 4) << bytes;
      EXPECT_LT(BufferPool::class_bytes(index - 1), bytes) << "not the smallest class for " << bytes;
    } else {
      EXPECT_EQ(index, 0u);
    }
  }
  for (std::size_t i = 1; i < 200; ++i) {
    EXPECT_LT(BufferPool::class_bytes(i - 1), BufferPool::class_bytes(i));
    EXPECT_EQ(BufferPool::class_for_request(BufferPool::class_bytes(i)), i);
  }
}

TEST(BufferPool, TakesHoldTheRequestAndComeEmpty) {
  BufferPool pool(1000);
  std::vector<Buffer> released;
  EXPECT_EQ(pool.take(0, released).capacity(), 0u);  // an empty message needs no buffer
  for (const std::size_t bytes : {1, 300, 5000, 1 << 20}) {
    Buffer b = pool.take(bytes, released);
    EXPECT_TRUE(b.empty());
    EXPECT_GE(b.capacity(), static_cast<std::size_t>(bytes));
    b.assign(bytes, std::byte{1});
    pool.give(std::move(b));
    Buffer again = pool.take(bytes, released);
    EXPECT_TRUE(again.empty()) << "a spare must come back cleared";
    EXPECT_GE(again.capacity(), static_cast<std::size_t>(bytes));
  }
  EXPECT_TRUE(released.empty());
}

// The traffic of an exchange: the same mix of sizes every round, in a different order, each buffer
// given back after use. After the first round nothing is allocated.
TEST(BufferPool, SteadyTrafficOfMixedSizesAllocatesNothing) {
  BufferPool pool(1u << 20);
  std::vector<Buffer> released;
  std::vector<std::size_t> sizes{4096, 1 << 20, 300, 70000, 1 << 20, 8192, 0, 5, 500000, 4096, 70001};
  std::set<const std::byte*> first_round;
  std::mt19937 rng(3);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(sizes.begin(), sizes.end(), rng);
    std::vector<Buffer> in_flight;
    for (const std::size_t bytes : sizes) {
      Buffer b = pool.take(bytes, released);
      ASSERT_GE(b.capacity(), bytes);
      const std::byte* const data = b.data();
      b.resize(bytes);
      EXPECT_EQ(b.data(), data) << "filling a taken buffer must not regrow it";
      if (round == 0) {
        if (bytes > 0) first_round.insert(data);
      } else if (bytes > 0) {
        EXPECT_EQ(first_round.count(data), 1u) << "round " << round << ": a new buffer for " << bytes << " bytes";
      }
      in_flight.push_back(std::move(b));
    }
    for (Buffer& b : in_flight) pool.give(std::move(b));
  }
  EXPECT_EQ(pool.spare_buffers(), sizes.size() - 1);  // the empty message held none
}

// A large spare is not spent on a small message (it would keep its capacity for good, and the next
// large message would need a new one).
TEST(BufferPool, SmallMessagesDoNotTakeLargeSpares) {
  BufferPool pool(1000);
  std::vector<Buffer> released;
  Buffer large = pool.take(1 << 20, released);
  const std::byte* const large_data = large.data();
  pool.give(std::move(large));
  Buffer small = pool.take(300, released);
  EXPECT_NE(small.data(), large_data);
  EXPECT_LT(small.capacity(), std::size_t{1} << 12);
  EXPECT_EQ(pool.take(1 << 20, released).data(), large_data);
}

// A receiver's own buffer goes to the largest class it holds whole.
TEST(BufferPool, ForeignCapacitiesServeTheClassesTheyHold) {
  BufferPool pool(1000);
  std::vector<Buffer> released;
  Buffer foreign;
  foreign.reserve(1000);  // between the classes 896 and 1024
  const std::byte* const data = foreign.data();
  pool.give(std::move(foreign));
  EXPECT_NE(pool.take(1000, released).data(), data) << "1000 bytes need the 1024 class";
  Buffer fits = pool.take(896, released);
  EXPECT_EQ(fits.data(), data);
  Buffer tiny;
  tiny.reserve(100);  // below the smallest class: freed, not pooled
  pool.give(std::move(tiny));
  EXPECT_EQ(pool.spare_buffers(), 0u);
}

// Spares a class did not need for a whole epoch are released; a class in use keeps what its
// busiest moment took.
TEST(BufferPool, TrimsWhatAnEpochDidNotUse) {
  const std::uint64_t epoch = 50;
  BufferPool pool(epoch);
  std::vector<Buffer> released;
  // An earlier phase leaves 6 spares of 1 MB.
  std::vector<Buffer> old_phase;
  for (int i = 0; i < 6; ++i) old_phase.push_back(pool.take(1 << 20, released));
  for (Buffer& b : old_phase) pool.give(std::move(b));
  EXPECT_EQ(pool.spare_buffers(), 6u);
  // The new phase sends bursts of three 4 KB messages.
  std::uint64_t takes = 6;
  while (takes < 3 * epoch) {
    std::vector<Buffer> burst;
    for (int i = 0; i < 3; ++i, ++takes) burst.push_back(pool.take(4096, released));
    for (Buffer& b : burst) pool.give(std::move(b));
  }
  std::size_t released_large = 0;
  for (const Buffer& b : released) released_large += b.capacity() >= (std::size_t{1} << 20);
  EXPECT_EQ(released_large, 6u) << "the old phase's spares stay pooled";
  EXPECT_EQ(pool.spare_buffers(), 3u);
  EXPECT_EQ(pool.spare_bytes(), 3 * BufferPool::class_bytes(BufferPool::class_for_request(4096)));
}

// Through the local transport: messages of changing sizes on the same buffers arrive whole.
TEST(BufferPool, LocalTransportDeliversMixedSizesIntact) {
  // 256 KB: past glibc's default mmap threshold, as the large messages of an exchange are.
  const std::vector<std::size_t> sizes{3000, 5, 1 << 18, 0, 70000, 257, 1 << 16, 1};
  auto pattern = [](std::size_t bytes, int rank) {
    std::vector<std::byte> b(bytes);
    for (std::size_t i = 0; i < bytes; ++i) b[i] = std::byte(static_cast<unsigned char>(i * 31 + static_cast<std::size_t>(rank)));
    return b;
  };
  for (const int p : {2, 3, 5}) {
    run_local_workers(p, [&](Transport& t) {
      std::vector<std::byte> reply;
      for (int round = 0; round < 2; ++round) {
        for (std::size_t s = 0; s < sizes.size(); ++s) {
          const int right = (t.rank() + 1) % p, left = (t.rank() + p - 1) % p;
          const std::vector<std::byte> message = pattern(sizes[(s + static_cast<std::size_t>(t.rank())) % sizes.size()], t.rank());
          t.sendrecv(right, 1, message, left, 1, reply, std::size_t{1} << 21);
          ASSERT_TRUE(reply == pattern(sizes[(s + static_cast<std::size_t>(left)) % sizes.size()], left))
              << "round " << round << ", message " << s << " from rank " << left;
        }
      }
    });
  }
}

}  // namespace
}  // namespace sparsgd::transport
