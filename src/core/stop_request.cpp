#include "sparsgd/core/stop_request.hpp"

#include <atomic>
#include <signal.h>

#include <csignal>

namespace sparsgd {
namespace {

std::atomic<int> requested{0};
static_assert(std::atomic<int>::is_always_lock_free, "the flag is set from a signal handler");

extern "C" void on_stop_signal(int signal) {
  int expected = 0;
  if (!requested.compare_exchange_strong(expected, signal)) {
    // Asked twice: the user means it. Default action, now.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_requested() { return requested.load(std::memory_order_relaxed); }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

}  // namespace sparsgd
