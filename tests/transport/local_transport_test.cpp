#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sparsgd/transport/local.hpp"

namespace sparsgd::transport {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string string_of(const std::vector<std::byte>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

TEST(LocalTransport, MatchesBySourceAndTagInOrder) {
  run_local_workers(3, [](Transport& t) {
    std::vector<std::byte> buffer;
    if (t.rank() == 1 || t.rank() == 2) {
      const std::string who = std::to_string(t.rank());
      t.send(0, 5, bytes_of("first from " + who));
      t.send(0, 6, bytes_of("tag six from " + who));
      t.send(0, 5, bytes_of("second from " + who));
    } else {
      // Receive out of arrival order: by tag and source, oldest first.
      t.recv(2, 6, buffer, 100);
      EXPECT_EQ(string_of(buffer), "tag six from 2");
      t.recv(1, 5, buffer, 100);
      EXPECT_EQ(string_of(buffer), "first from 1");
      t.recv(1, 5, buffer, 100);
      EXPECT_EQ(string_of(buffer), "second from 1");
      t.recv(2, 5, buffer, 100);
      EXPECT_EQ(string_of(buffer), "first from 2");
      t.recv(1, 6, buffer, 100);
      EXPECT_EQ(string_of(buffer), "tag six from 1");
      t.recv(2, 5, buffer, 100);
      EXPECT_EQ(string_of(buffer), "second from 2");
    }
  });
}

TEST(LocalTransport, CountsBytesAndMessages) {
  run_local_workers(2, [](Transport& t) {
    std::vector<std::byte> buffer;
    const int peer = 1 - t.rank();
    t.sendrecv(peer, 1, bytes_of(std::string(10 + t.rank(), 'x')), peer, 1, buffer, 100);
    EXPECT_EQ(buffer.size(), static_cast<std::size_t>(10 + peer));
    EXPECT_EQ(t.counters().bytes_sent, static_cast<std::uint64_t>(10 + t.rank()));
    EXPECT_EQ(t.counters().bytes_received, static_cast<std::uint64_t>(10 + peer));
    EXPECT_EQ(t.counters().messages_sent, 1u);
    EXPECT_EQ(t.counters().messages_received, 1u);
    t.barrier();
  });
}

// The work in flight runs once per exchange, after the send: the partner's message can be received
// while it runs. If it throws, the exception comes out of sendrecv and the message sent still
// arrives.
TEST(LocalTransport, SendrecvRunsTheWorkInFlight) {
  run_local_workers(2, [](Transport& t) {
    std::vector<std::byte> buffer, early;
    const int peer = 1 - t.rank();
    int runs = 0;
    t.sendrecv(peer, 1, bytes_of("one from " + std::to_string(t.rank())), peer, 1, buffer, 100, [&] { ++runs; });
    EXPECT_EQ(runs, 1);
    EXPECT_EQ(string_of(buffer), "one from " + std::to_string(peer));
    if (t.rank() == 0) {
      EXPECT_THROW(t.sendrecv(peer, 2, bytes_of("two"), peer, 2, buffer, 100,
                              [] { throw InvalidArgument("work in flight failed"); }),
                   InvalidArgument);
    } else {
      // Rank 1 sends nothing with tag 2 on rank 0's behalf; it only checks rank 0's send arrived.
      t.recv(peer, 2, buffer, 100);
      EXPECT_EQ(string_of(buffer), "two");
      t.send(peer, 2, bytes_of("late"));
    }
    t.barrier();
  });
}

TEST(LocalTransport, RejectsInvalidPeersAndOversizedMessages) {
  EXPECT_THROW(run_local_workers(2,
                                 [](Transport& t) {
                                   if (t.rank() == 0) t.send(0, 1, bytes_of("self"));
                                 }),
               TransportError);
  EXPECT_THROW(run_local_workers(2,
                                 [](Transport& t) {
                                   if (t.rank() == 0) t.send(7, 1, bytes_of("nobody"));
                                 }),
               TransportError);
  try {
    run_local_workers(2, [](Transport& t) {
      std::vector<std::byte> buffer;
      if (t.rank() == 0) t.send(1, 1, bytes_of("too long for you"));
      if (t.rank() == 1) t.recv(0, 1, buffer, 4);
    });
    FAIL() << "expected an error";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 4 expected"), std::string::npos) << e.what();
  }
}

TEST(LocalTransport, ReceiveTimeoutNamesThePeer) {
  const auto start = std::chrono::steady_clock::now();
  try {
    run_local_workers(
        3,
        [](Transport& t) {
          std::vector<std::byte> buffer;
          if (t.rank() == 0) t.recv(2, 9, buffer, 10);  // rank 2 never sends
        },
        std::chrono::milliseconds(200));
    FAIL() << "expected a timeout";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("from rank 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Rank 0 waits for rank 1, which waits for rank 2, which is stuck outside the transport: the
// timeout names the whole chain down to the culprit, and the stuck worker can see the abort.
TEST(LocalTransport, TimeoutFollowsTheWaitChainToTheStuckRank) {
  bool stuck_saw_abort = false;
  try {
    run_local_workers(
        3,
        [&](Transport& t) {
          std::vector<std::byte> buffer;
          if (t.rank() == 2) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!t.aborted() && std::chrono::steady_clock::now() < until) {
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            stuck_saw_abort = t.aborted();
            throw PeerFailed("stuck worker released");
          }
          // Rank 1 waits longer, so rank 0's timeout comes first and sees rank 1 still waiting.
          if (t.rank() == 1) t.set_timeout(std::chrono::milliseconds(5000));
          t.recv(t.rank() + 1, 4, buffer, 10);
        },
        std::chrono::milliseconds(300));
    FAIL() << "expected a timeout";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("from rank 1, which waits for rank 2, which is not waiting"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(stuck_saw_abort);
}

TEST(LocalTransport, AFailingWorkerStopsTheOthersPromptlyAndIsReported) {
  const auto start = std::chrono::steady_clock::now();
  try {
    run_local_workers(
        4,
        [](Transport& t) {
          std::vector<std::byte> buffer;
          if (t.rank() == 2) throw std::runtime_error("worker two broke");
          t.recv((t.rank() + 1) % 4, 1, buffer, 10);  // would wait forever without the abort
        },
        std::chrono::milliseconds(30'000));
    FAIL() << "expected the failure to propagate";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("worker 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("worker two broke"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(LocalTransport, WhenSeveralWorkersFailTheLowestRanksOwnErrorIsReported) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      run_local_workers(4, [](Transport& t) {
        if (t.rank() == 1 || t.rank() == 3) throw std::runtime_error("own failure of rank " + std::to_string(t.rank()));
        std::vector<std::byte> buffer;
        t.recv(t.rank() == 0 ? 1 : 0, 1, buffer, 10);  // ends when a failure aborts the run
      });
      FAIL() << "expected an error";
    } catch (const TransportError& e) {
      EXPECT_NE(std::string(e.what()).find("own failure of rank 1"), std::string::npos) << e.what();
    }
  }
}

TEST(LocalTransport, BarrierTimesOutWhenAWorkerNeverArrives) {
  try {
    run_local_workers(
        3,
        [](Transport& t) {
          if (t.rank() != 1) t.barrier();
        },
        std::chrono::milliseconds(200));
    FAIL() << "expected a barrier timeout";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("barrier"), std::string::npos) << e.what();
  }
}

TEST(LocalTransport, ManyBarriersInARow) {
  std::atomic<int> passed{0};
  run_local_workers(7, [&](Transport& t) {
    for (int i = 0; i < 200; ++i) t.barrier();
    ++passed;
  });
  EXPECT_EQ(passed.load(), 7);
}

}  // namespace
}  // namespace sparsgd::transport
