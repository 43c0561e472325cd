// The c10d transport on real gloo process groups: P threads in this process, each with its own
// gloo backend over loopback (a shared in-memory store), as torch.distributed makes them.
// Point-to-point semantics, refusals and failures naming the peer, and the aggregator conformance
// suite that the local transport passes.

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "collectives/conformance.hpp"
#include "sparsgd/torch/process_group_transport.hpp"

namespace sparsgd {
namespace {

using torch_layer::ProcessGroupTransport;
using transport::Transport;
using transport::TransportError;

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size) {
  // torch's flight recorder (a process-wide log of collectives) inserts a group into its status map
  // before it takes its lock (FlightRecorder::recordWithResetEnabled, torch 2.11): with several
  // groups in one process, as here, that races and corrupts the heap. One group a process, as in a
  // real job, never races; the recorder is off for these groups unless the environment says
  // otherwise.
  setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->timeout = std::chrono::milliseconds(60'000);
  // As torch.distributed builds a group: a ProcessGroup whose CPU backend is gloo.
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO,
                    c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options));
  return group;
}

// Runs `worker` on `workers` threads, each with its own gloo group and transport; rethrows the
// lowest rank's exception. `keep_groups` holds the groups until every thread is done.
void run_gloo_workers(int workers, const std::function<void(Transport&)>& worker,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000)) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupTransport t(make_gloo_group(store, r, workers));
        t.set_timeout(timeout);
        worker(t);
        t.barrier();  // no group is destroyed while a peer still talks to it
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) { return std::as_bytes(std::span(v)); }

TEST(ProcessGroupTransport, MatchesByPeerAndTagInOrderForEverySize) {
  const std::vector<std::size_t> sizes = {0, 1, 7, 4096, 3'000'001};
  run_gloo_workers(3, [&](Transport& t) {
    EXPECT_EQ(t.size(), 3);
    std::vector<std::byte> got;
    if (t.rank() == 0) {
      // Sent in one order on two tags, received in the other: matching is by (peer, tag).
      for (std::size_t s : sizes) {
        std::vector<std::uint8_t> a(s, 0xA1), b(s + 1, 0xB2);
        t.send(1, 5, bytes_of(a));
        t.send(1, 6, bytes_of(b));
      }
    } else if (t.rank() == 1) {
      for (std::size_t s : sizes) {
        ASSERT_EQ(t.recv(0, 6, got, s + 1), s + 1);
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](std::byte x) { return x == std::byte{0xB2}; }));
        ASSERT_EQ(t.recv(0, 5, got, s), s);
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](std::byte x) { return x == std::byte{0xA1}; }));
      }
      EXPECT_EQ(t.counters().messages_received, 2 * sizes.size());
    }
    // Pairwise exchange, including with itself excluded: each rank swaps with the next.
    const int next = (t.rank() + 1) % t.size(), prev = (t.rank() + t.size() - 1) % t.size();
    std::vector<std::uint8_t> mine(1000, static_cast<std::uint8_t>(t.rank()));
    bool ran = false;
    t.sendrecv(next, 9, bytes_of(mine), prev, 9, got, 1000, [&] { ran = true; });
    EXPECT_TRUE(ran);
    ASSERT_EQ(got.size(), 1000u);
    EXPECT_EQ(got[0], std::byte(prev));
  });
}

TEST(ProcessGroupTransport, RefusesAMessageLongerThanExpectedNamingThePeer) {
  try {
    run_gloo_workers(2, [](Transport& t) {
      std::vector<std::byte> got;
      if (t.rank() == 1) {
        t.send(0, 3, bytes_of(std::vector<std::uint8_t>(100)));
      } else {
        t.recv(1, 3, got, 99);
      }
    }, std::chrono::milliseconds(5'000));
    FAIL() << "accepted";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("a message of 100 bytes from rank 1 (tag 3) is longer than the at most 99"),
              std::string::npos) << e.what();
  }
}

// A timed-out wait is fatal to the group (gloo closes the pair), so the silent peer only waits here.
TEST(ProcessGroupTransport, ASilentPeerTimesOutNamingIt) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::atomic<bool> done{false};
  std::thread silent([&] {
    ProcessGroupTransport t(make_gloo_group(store, 1, 2));
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  std::string error;
  {
    ProcessGroupTransport t(make_gloo_group(store, 0, 2));
    t.set_timeout(std::chrono::milliseconds(300));
    std::vector<std::byte> got;
    const auto start = std::chrono::steady_clock::now();
    try {
      t.recv(1, 4, got, 10);
    } catch (const TransportError& e) {
      error = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    done = true;
    silent.join();
  }
  EXPECT_NE(error.find("rank 0: timed out after 300 ms waiting for a message from rank 1 (tag 4)"), std::string::npos)
      << error;
}

TEST(ProcessGroupTransport, APeerThatLeavesEndsTheWaitNamingIt) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string error;
  std::thread leaver([&] {
    auto group = make_gloo_group(store, 1, 2);
    ProcessGroupTransport t(group);
    t.barrier();
    // The group is destroyed here: its connections close.
  });
  {
    ProcessGroupTransport t(make_gloo_group(store, 0, 2));
    t.set_timeout(std::chrono::milliseconds(20'000));
    t.barrier();
    leaver.join();
    std::vector<std::byte> got;
    const auto start = std::chrono::steady_clock::now();
    try {
      t.recv(1, 1, got, 10);
    } catch (const TransportError& e) {
      error = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(19));
  }
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
}

TEST(ProcessGroupTransport, DenseAllreduceUsesTheGroupAndChecksAgreement) {
  run_gloo_workers(3, [](Transport& t) {
    std::vector<float> v = {1.0f * static_cast<float>(t.rank()), 2.0f};
    const std::uint64_t agree[] = {7, 2};
    ASSERT_TRUE(t.native_allreduce_sum(v, agree));
    EXPECT_EQ(v[0], 3.0f);
    EXPECT_EQ(v[1], 6.0f);
  });
  EXPECT_THROW(run_gloo_workers(2, [](Transport& t) {
    std::vector<float> v(4, 1.0f);
    const std::uint64_t agree[] = {7, static_cast<std::uint64_t>(t.rank())};
    t.native_allreduce_sum(v, agree);
  }), TransportError);
}

TEST(ProcessGroupTransport, RefusesANullGroup) {
  EXPECT_THROW(ProcessGroupTransport(c10::intrusive_ptr<c10d::ProcessGroup>()), InvalidArgument);
}

// The conformance suite of the aggregators, on gloo: worker counts up to 8 (each a full mesh of
// loopback connections).
class ProcessGroupConformance : public ::testing::TestWithParam<testing::Case> {};

TEST_P(ProcessGroupConformance, MatchesReferenceConservesMassAndCountsBytes) {
  testing::check_aggregator_conformance(GetParam(), [](int workers, const auto& worker) {
    run_gloo_workers(workers, worker);
  }, /*native_dense=*/true);
}

std::vector<testing::Case> gloo_cases() {
  std::vector<testing::Case> cases;
  for (const auto& c : testing::all_cases()) {
    // Compressed indices change no transport call: two worker counts suffice over gloo.
    if (c.compressed_indices && c.workers != 3 && c.workers != 8) continue;
    if ((c.workers <= 5 || c.workers == 7 || c.workers == 8) && c.n <= 5000) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gloo, ProcessGroupConformance, ::testing::ValuesIn(gloo_cases()), testing::case_name);

}  // namespace
}  // namespace sparsgd
