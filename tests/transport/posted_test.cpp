// Non-blocking point-to-point (Transport::post_send, post_recv, Request): the default built on
// the blocking calls (local transport), the pass-through of wrappers and the simulated network's
// clock, for many worker counts and sizes. MPI's native requests run the same exchange through
// mpirun (mpi_posted_main.cpp).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/posted_exchange.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::transport {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) b[i] = static_cast<std::byte>(s[i]);
  return b;
}

std::string string_of(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(PostedMessages, AllToAllArrivesIntactForManyWorkerCountsAndSizes) {
  for (const int p : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (const std::size_t base : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{70000}}) {
      for (const bool sends_first : {false, true}) {
        run_local_workers(p, [&](Transport& t) {
          EXPECT_EQ(testing::posted_all_to_all(t, base, sends_first), "") << "P=" << p << " base=" << base;
          // Two messages to and from each other rank, counted once each.
          EXPECT_EQ(t.counters().messages_sent, static_cast<std::uint64_t>(2 * (p - 1)));
          EXPECT_EQ(t.counters().messages_received, static_cast<std::uint64_t>(2 * (p - 1)));
          std::uint64_t sent = 0, received = 0;
          for (int s = 1; s < p; ++s) {
            for (int m = 0; m < 2; ++m) {
              sent += testing::posted_length(base, t.rank(), (t.rank() + s) % p, m);
              received += testing::posted_length(base, (t.rank() + s) % p, t.rank(), m);
            }
          }
          EXPECT_EQ(t.counters().bytes_sent, sent);
          EXPECT_EQ(t.counters().bytes_received, received);
        });
      }
    }
  }
}

TEST(PostedMessages, ThroughASimulatedNetworkToo) {
  for (const int p : {2, 3, 5, 8}) {
    run_local_workers(p, [&](Transport& base) {
      SimulatedNetwork net(base, parse_network("1gbe"));
      // Posted sends stamp into the frames of earlier ones: each size after a larger one, a
      // smaller one and an empty one must still arrive intact.
      EXPECT_EQ(testing::posted_all_to_all(net, 3000, true), "") << "P=" << p;
      EXPECT_EQ(testing::posted_all_to_all(net, 5, false, 78), "") << "P=" << p;
      EXPECT_EQ(testing::posted_all_to_all(net, 70000, true, 79), "") << "P=" << p;
      EXPECT_EQ(testing::posted_all_to_all(net, 0, false, 80), "") << "P=" << p;
      EXPECT_EQ(testing::posted_all_to_all(net, 1000, true, 81), "") << "P=" << p;
      EXPECT_EQ(net.counters().messages_sent, static_cast<std::uint64_t>(10 * (p - 1)));
    });
  }
}

TEST(PostedMessages, ReceivesMatchInTheOrderPostedAndOutOfOrderWaitsAreRefused) {
  run_local_workers(2, [](Transport& t) {
    if (t.rank() == 1) {
      for (const char* text : {"one", "two", "three"}) t.post_send(0, 3, bytes_of(text)).wait();
      return;
    }
    std::vector<std::byte> a, b, c;
    Request first = t.post_recv(1, 3, a, 10);
    Request second = t.post_recv(1, 3, b, 10);
    try {
      second.wait();  // the local transport receives at wait time: this one would take "one"
      ADD_FAILURE() << "an out-of-order wait was accepted";
    } catch (const TransportError& e) {
      EXPECT_NE(std::string(e.what()).find("out of the order they were posted"), std::string::npos) << e.what();
    }
    EXPECT_EQ(first.wait(), 3u);
    EXPECT_EQ(second.wait(), 3u);
    EXPECT_EQ(string_of(a), "one");
    EXPECT_EQ(string_of(b), "two");
    // A receive dropped unfinished takes no message, as a cancelled MPI receive.
    { Request dropped = t.post_recv(1, 3, c, 10); }
    Request last = t.post_recv(1, 3, c, 10);
    last.wait();
    EXPECT_EQ(string_of(c), "three");
    EXPECT_EQ(t.counters().messages_received, 3u);
  });
}

TEST(PostedMessages, RequestsReportMisuseAndFailures) {
  run_local_workers(2, [](Transport& t) {
    t.set_timeout(std::chrono::milliseconds(200));
    std::vector<std::byte> buffer;
    if (t.rank() == 0) {
      Request none;
      EXPECT_FALSE(none.pending());
      EXPECT_THROW(none.wait(), TransportError);
      EXPECT_THROW(t.post_send(0, 1, bytes_of("x")), TransportError);  // to itself
      EXPECT_THROW(t.post_recv(2, 1, buffer, 1), TransportError);      // no such rank
      Request sent = t.post_send(1, 1, bytes_of("too long"));
      EXPECT_TRUE(sent.test());  // buffered: done at once, and counted
      EXPECT_FALSE(sent.pending());
      EXPECT_EQ(t.counters().bytes_sent, 8u);
      // Nothing is sent with tag 2: the wait times out, naming the peer.
      Request never = t.post_recv(1, 2, buffer, 10);
      try {
        never.wait();
        ADD_FAILURE() << "a receive with no message returned";
      } catch (const TransportError& e) {
        EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
      }
    } else {
      Request too_short = t.post_recv(0, 1, buffer, 3);
      EXPECT_THROW(too_short.wait(), TransportError);  // 8 bytes where 3 were allowed
    }
  });
}

TEST(PostedMessages, WaitAllThrowsTheFirstFailureAfterAbandoningTheRest) {
  run_local_workers(2, [](Transport& t) {
    t.set_timeout(std::chrono::milliseconds(200));
    if (t.rank() == 1) {
      t.send(0, 9, bytes_of("later"));
      return;
    }
    std::vector<std::byte> a, b;
    std::vector<Request> requests;
    requests.push_back(t.post_recv(1, 8, a, 10));  // never sent: times out
    requests.push_back(t.post_recv(1, 9, b, 10));
    EXPECT_THROW(wait_all(requests), TransportError);
    EXPECT_FALSE(requests[1].pending());
    t.recv(1, 9, b, 10);  // the abandoned receive took nothing
    EXPECT_EQ(string_of(b), "later");
  });
}

// Posted sends leave one after the other on the sender's link, and compute between the post and
// the wait runs while they travel; a blocking send would charge both in turn.
TEST(PostedMessages, TheSimulatedClockOverlapsComputeWithPostedSends) {
  const NetworkSpec spec = parse_network("alpha=0.01,bw=8e6");  // 10 ms + 1 us a byte
  std::vector<double> clocks(3), cpu(3);
  run_local_workers(3, [&](Transport& base) {
    const double cpu_start = thread_cpu_seconds();
    SimulatedNetwork net(base, spec);
    std::vector<std::byte> payload(4000), buffer;
    const auto r = static_cast<std::size_t>(base.rank());
    if (r == 0) {
      Request a = net.post_send(1, 1, payload), b = net.post_send(2, 1, payload);
      const double until = thread_cpu_seconds() + 0.004;  // 4 ms of compute while both leave (8 ms)
      volatile double sink = 0.0;
      while (thread_cpu_seconds() < until) sink = sink + 1.0;
      a.wait();
      b.wait();
    } else {
      net.post_recv(0, 1, buffer, payload.size()).wait();
      EXPECT_EQ(buffer.size(), payload.size());
    }
    clocks[r] = net.now();
    cpu[r] = thread_cpu_seconds() - cpu_start;
  });
  EXPECT_GE(clocks[0], 0.008);
  EXPECT_LE(clocks[0], 0.008 + (cpu[0] - 0.004) + 1e-4);  // the 4 ms hid behind the transfers
  EXPECT_GE(clocks[1], 0.014);  // first 4000 bytes, then 10 ms of flight
  EXPECT_LE(clocks[1], 0.014 + cpu[0] + cpu[1] + 1e-4);
  EXPECT_GE(clocks[2], 0.018);  // behind the first on the sender's link
  EXPECT_LE(clocks[2], 0.018 + cpu[0] + cpu[2] + 1e-4);
}

}  // namespace
}  // namespace sparsgd::transport
