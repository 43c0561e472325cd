// The delayed transport holds each message back by its delay, on the wall clock, and otherwise
// moves messages as the transport it wraps.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/delayed.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::transport {
namespace {

TEST(DelayedTransport, EachMessageLeavesAfterTheDelay) {
  using clock = std::chrono::steady_clock;
  constexpr auto delay = std::chrono::milliseconds(40);
  std::vector<double> waited(2, 0.0);
  run_local_workers(2, [&](Transport& inner) {
    DelayedTransport t(inner, delay);
    const auto start = clock::now();
    std::vector<std::byte> buffer;
    for (int round = 0; round < 3; ++round) {
      const std::int32_t value = 100 * t.rank() + round;
      std::byte bytes[sizeof value];
      std::memcpy(bytes, &value, sizeof value);
      if (t.rank() == 0) {
        t.send(1, round, bytes);
        ASSERT_EQ(t.recv(1, round, buffer, 64), sizeof value);
      } else {
        ASSERT_EQ(t.recv(0, round, buffer, 64), sizeof value);
        t.send(0, round, bytes);
      }
      std::int32_t got = 0;
      std::memcpy(&got, buffer.data(), sizeof got);
      EXPECT_EQ(got, 100 * (1 - t.rank()) + round);
    }
    waited[static_cast<std::size_t>(t.rank())] = std::chrono::duration<double>(clock::now() - start).count();
  });
  // Three round trips of two delayed messages each: at least 6 delays on the clock (a lower bound:
  // a loaded machine only adds to it).
  EXPECT_GE(waited[0], 6 * 0.040);
}

TEST(DelayedTransport, RefusesANegativeDelay) {
  run_local_workers(1, [&](Transport& inner) {
    EXPECT_THROW(DelayedTransport(inner, std::chrono::microseconds(-1)), InvalidArgument);
  });
}

}  // namespace
}  // namespace sparsgd::transport
