// The posted all-to-all of posted_test.cpp over MPI's native requests (MPI_Isend, MPI_Irecv), run
// through mpirun by CTest: sizes from empty to well past the eager limit (rendezvous), sends
// posted before the receives (which blocking sends of large messages would deadlock), and the
// simulated network layered on MPI. Exit status 0 only if every rank saw every byte right.

#include <cstdio>
#include <exception>
#include <string>

#include "sparsgd/transport/mpi.hpp"
#include "sparsgd/transport/network_model.hpp"
#include "transport/posted_exchange.hpp"

int main(int argc, char** argv) {
  using namespace sparsgd;
  transport::MpiSession session(&argc, &argv);
  transport::MpiTransport t;
  t.set_timeout(std::chrono::milliseconds(30'000));
  int failures = 0;
  auto check = [&](const std::string& what, const std::string& fault) {
    if (fault.empty()) return;
    std::fprintf(stderr, "rank %d: %s: %s\n", t.rank(), what.c_str(), fault.c_str());
    ++failures;
  };
  try {
    int tag = 100;
    for (const std::size_t base : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{400'000}}) {
      for (const bool sends_first : {false, true}) {
        check("base " + std::to_string(base) + (sends_first ? ", sends first" : ", receives first"),
              testing::posted_all_to_all(t, base, sends_first, tag++));
      }
    }
    transport::SimulatedNetwork net(t, transport::parse_network("1gbe"));
    check("simulated network", testing::posted_all_to_all(net, 400'000, true, tag++));
    // Every message went through MPI once (the simulated network's through it too).
    const std::uint64_t per_exchange = 2 * static_cast<std::uint64_t>(t.size() - 1);
    if (t.counters().messages_sent != 9 * per_exchange || t.counters().messages_received != 9 * per_exchange ||
        net.counters().messages_sent != per_exchange || net.counters().messages_received != per_exchange) {
      check("counters", "MPI sent/received " + std::to_string(t.counters().messages_sent) + "/" +
                            std::to_string(t.counters().messages_received) + ", expected " +
                            std::to_string(9 * per_exchange) + " each");
    }
    t.barrier();
  } catch (const std::exception& e) {
    check("exception", e.what());
  }
  if (failures == 0 && t.rank() == 0) std::printf("posted all-to-all on %d ranks: every message intact\n", t.size());
  return failures == 0 ? 0 : 1;
}
