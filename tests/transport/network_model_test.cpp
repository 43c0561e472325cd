#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::transport {
namespace {

TEST(NetworkSpec, ParsesPresetsAndCustomSpecs) {
  EXPECT_FALSE(parse_network("none").enabled());
  const NetworkSpec paper = parse_network("paper-1gbe");
  EXPECT_DOUBLE_EQ(paper.alpha_seconds, 0.436e-3);
  EXPECT_NEAR(1.0 / paper.bytes_per_second, 9e-9, 1e-18);
  const NetworkSpec gbe = parse_network("1gbe");
  EXPECT_DOUBLE_EQ(gbe.bytes_per_second, 125e6);
  EXPECT_DOUBLE_EQ(gbe.alpha_seconds, 50e-6);
  const NetworkSpec custom = parse_network("alpha=0.001,bw=8e6");
  EXPECT_DOUBLE_EQ(custom.alpha_seconds, 0.001);
  EXPECT_DOUBLE_EQ(custom.bytes_per_second, 1e6);
  EXPECT_DOUBLE_EQ(custom.message_seconds(1000), 0.002);
}

TEST(NetworkSpec, RejectsBadSpecs) {
  for (const char* bad : {"2gbe", "alpha=1", "alpha=x,bw=1e9", "alpha=-1,bw=1e9", "alpha=0,bw=0", "alpha=0,bw=nan",
                          "alpha=0,bw=1e9junk", "bw=1e9,alpha=0"}) {
    EXPECT_THROW(parse_network(bad), InvalidArgument) << bad;
  }
}

TEST(SimulatedNetwork, ChargesAlphaPlusBytesOverBandwidth) {
  const NetworkSpec spec = parse_network("alpha=0.01,bw=8e6");  // 10 ms + 1 us per byte
  std::vector<double> clocks(2), cpu(2);
  run_local_workers(2, [&](Transport& base) {
    const double cpu_start = thread_cpu_seconds();
    SimulatedNetwork net(base, spec);
    std::vector<std::byte> buffer;
    std::vector<std::byte> payload(5000);
    if (base.rank() == 0) {
      net.send(1, 1, payload);
      clocks[0] = net.now();
    } else {
      net.recv(0, 1, buffer, payload.size());
      EXPECT_EQ(buffer.size(), payload.size());
      clocks[1] = net.now();
    }
    EXPECT_EQ(net.counters().bytes_sent + net.counters().bytes_received, payload.size());
    cpu[static_cast<std::size_t>(base.rank())] = thread_cpu_seconds() - cpu_start;
  });
  // The sender is busy for 5 ms pushing the bytes; the receiver has them 10 ms later. Compute
  // time also lands on the clocks: a few microseconds, but far more under a sanitizer on a busy
  // machine, so the bound is what each thread really spent, not a fixed slack.
  EXPECT_GE(clocks[0], 0.005);
  EXPECT_LE(clocks[0], 0.005 + cpu[0] + 1e-4);
  EXPECT_GE(clocks[1], 0.015);
  EXPECT_LE(clocks[1], 0.015 + cpu[0] + cpu[1] + 1e-4);
}

// Burns `seconds` of this thread's CPU time.
void compute_for(double seconds) {
  const double until = thread_cpu_seconds() + seconds;
  volatile double sink = 0.0;
  while (thread_cpu_seconds() < until) sink = sink + 1.0;
}

// Work given to sendrecv runs while the messages fly: it costs nothing on the clock if it is
// shorter than the flight, and only what exceeds it otherwise; the same work after the exchange
// adds to it in full.
TEST(SimulatedNetwork, WorkInFlightHidesBehindTheTransfer) {
  const NetworkSpec spec = parse_network("alpha=0.05,bw=8e9");  // 50 ms, bytes almost free
  for (const double work : {0.01, 0.08}) {
    for (const bool in_flight : {true, false}) {
      std::vector<double> clocks(2);
      std::vector<int> runs(2);
      run_local_workers(2, [&](Transport& base) {
        SimulatedNetwork net(base, spec);
        const int peer = 1 - base.rank();
        const auto me = static_cast<std::size_t>(base.rank());
        std::vector<std::byte> buffer, payload(100);
        const InFlightWork job = [&] {
          ++runs[me];
          compute_for(work);
        };
        net.sendrecv(peer, 1, payload, peer, 1, buffer, payload.size(), in_flight ? job : InFlightWork{});
        if (!in_flight) job();
        clocks[me] = net.now();
      });
      SCOPED_TRACE(std::to_string(work) + (in_flight ? " s in flight" : " s after"));
      const double want = in_flight ? std::max(0.05, work) : 0.05 + work;
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(runs[static_cast<std::size_t>(r)], 1);
        EXPECT_GE(clocks[static_cast<std::size_t>(r)], want);
        EXPECT_LT(clocks[static_cast<std::size_t>(r)], want + 0.005);
      }
    }
  }
}

TEST(SimulatedNetwork, ALinkSendsOneMessageAtATime) {
  const NetworkSpec spec = parse_network("alpha=0,bw=8e6");  // 1 us per byte, no latency
  double last_arrival = 0.0;
  run_local_workers(3, [&](Transport& base) {
    SimulatedNetwork net(base, spec);
    std::vector<std::byte> buffer, payload(10000);
    if (base.rank() == 0) {
      net.send(1, 1, payload);  // 10 ms
      net.send(2, 1, payload);  // queued behind it: leaves at 10 ms, arrives at 20 ms
    } else if (base.rank() == 2) {
      net.recv(0, 1, buffer, payload.size());
      last_arrival = net.now();
    } else {
      net.recv(0, 1, buffer, payload.size());
    }
  });
  EXPECT_NEAR(last_arrival, 0.020, 0.002);
  EXPECT_GE(last_arrival, 0.020);
}

}  // namespace
}  // namespace sparsgd::transport
