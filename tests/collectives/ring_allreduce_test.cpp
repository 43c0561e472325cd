// The ring allreduce on its own, with segments small enough that the pipeline (a segment summed
// while the next is in flight) runs at test sizes: every rank's result against the exact sum, and
// the messages and bytes each rank sends against the closed form.

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/closed_form_bytes.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::collectives {
namespace {

// Small integers, so that every order of addition gives the exact sum.
float value_of(int rank, std::size_t i) { return static_cast<float>(static_cast<int>((rank * 31 + i * 7) % 13) - 6); }

void check_ring(int workers, std::size_t n, std::size_t segment_values, bool simulated) {
  const wire::Expectation expect{kDenseRing, static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(n), n, -1,
                                 "dense"};
  std::vector<float> want(n, 0.0f);
  for (int r = 0; r < workers; ++r) {
    for (std::size_t i = 0; i < n; ++i) want[i] += value_of(r, i);
  }
  std::mutex mu;
  std::vector<std::vector<float>> got(static_cast<std::size_t>(workers));
  std::vector<transport::TrafficCounters> counters(static_cast<std::size_t>(workers));
  transport::run_local_workers(workers, [&](transport::Transport& base) {
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = value_of(base.rank(), i);
    auto run = [&](transport::Transport& t) {
      ring_allreduce(t, values, expect, 42, 100, segment_values);
      std::lock_guard lock(mu);
      got[static_cast<std::size_t>(t.rank())] = values;
      counters[static_cast<std::size_t>(t.rank())] = t.counters();
    };
    if (simulated) {
      transport::SimulatedNetwork net(base, transport::parse_network("1gbe"));
      run(net);
    } else {
      run(base);
    }
  });
  const std::size_t segments = ring_segment_count(n, workers, segment_values);
  for (int r = 0; r < workers; ++r) {
    SCOPED_TRACE(::testing::Message() << "P=" << workers << " n=" << n << " segment " << segment_values << " rank "
                                      << r << (simulated ? " simulated" : ""));
    ASSERT_EQ(got[static_cast<std::size_t>(r)], want);
    const std::uint64_t messages = workers > 1 ? 2 * static_cast<std::uint64_t>(workers - 1) * segments : 0;
    EXPECT_EQ(counters[static_cast<std::size_t>(r)].messages_sent, messages);
    std::uint64_t bytes = 0;
    auto mod = [workers](int x) { return ((x % workers) + workers) % workers; };
    for (int s = 0; s < workers - 1; ++s) {
      bytes += 4 * testing::chunk_size(n, workers, mod(r - s)) + segments * wire::dense_message_bytes(0);
      bytes += 4 * testing::chunk_size(n, workers, mod(r + 1 - s)) + segments * wire::dense_message_bytes(0);
    }
    EXPECT_EQ(counters[static_cast<std::size_t>(r)].bytes_sent, workers > 1 ? bytes : 0);
  }
}

TEST(RingAllreduce, SegmentedSumsExactlyForManyWorkerCountsAndSizes) {
  for (int workers : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{97}, std::size_t{1000}}) {
      for (std::size_t segment : {std::size_t{1}, std::size_t{2}, std::size_t{7}, kRingSegmentValues}) {
        check_ring(workers, n, segment, false);
      }
    }
  }
}

TEST(RingAllreduce, SegmentedUnderTheSimulatedNetwork) {
  for (int workers : {2, 3, 5}) check_ring(workers, 1000, 64, true);
}

TEST(RingAllreduce, SegmentCountFollowsTheLargestChunk) {
  EXPECT_EQ(ring_segment_count(0, 4), 1u);
  EXPECT_EQ(ring_segment_count(4 * kRingSegmentValues, 4), 1u);
  EXPECT_EQ(ring_segment_count(4 * kRingSegmentValues + 1, 4), 2u);
  EXPECT_EQ(ring_segment_count(25'000'000, 4), 6u);  // chunks of 6.25 M floats
  EXPECT_EQ(ring_segment_count(25'000'000, 32), 1u);
  EXPECT_EQ(ring_segment_count(10, 3, 2), 2u);        // chunks of 4, 3, 3
  const auto s = ring_segment({10, 17}, 1, 3);         // 7 values in 3 segments: 2, 2, 3
  EXPECT_EQ(s.first, 12u);
  EXPECT_EQ(s.second, 14u);
}

}  // namespace
}  // namespace sparsgd::collectives
