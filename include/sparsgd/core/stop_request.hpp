#pragma once
// A request to stop (SIGINT, SIGTERM) that long-running work checks at safe points, so that it can
// end with a message saying what was saved and how to continue instead of dying mid-write. The
// library never installs handlers itself; a program that wants this calls
// install_stop_handlers() (the CLI does). A second signal ends the process at once.

#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd {

// What a stopped run throws; `signal` is the signal that asked for it.
class Interrupted : public Error {
 public:
  Interrupted(const std::string& what, int signal) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

void install_stop_handlers();
// The signal number that asked to stop, or 0.
int stop_requested();
// "SIGINT", "SIGTERM" or "signal N".
std::string signal_name(int signal);

}  // namespace sparsgd
