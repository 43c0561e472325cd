#pragma once
// Memory checked up front. A command estimates what it will allocate (in named parts, so that a
// refusal says where the bytes go) and compares it with what this process can still get: a size
// that cannot fit is refused at once with the estimate and the limit, instead of being killed by
// the kernel's OOM killer minutes later with no message.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace sparsgd {

// Not enough memory (or another resource) for what was asked.
class ResourceExhausted : public Error {
 public:
  using Error::Error;
};

struct MemoryAvailable {
  double bytes = 0;
  std::string source;  // which limit is the tightest, e.g. "MemAvailable in /proc/meminfo"
};

// The tightest of: the machine's MemAvailable, the cgroup's limit less its usage (v1 and v2), and
// the address-space limit (ulimit -v) less this process's current size. Empty when none of them
// can be read (then nothing is refused).
std::optional<MemoryAvailable> available_memory();

struct MemoryPart {
  std::string what;  // "4 workers x 3 arrays of n floats"
  double bytes = 0;
};

struct MemoryEstimate {
  std::vector<MemoryPart> parts;
  void add(std::string what, double bytes) { parts.push_back({std::move(what), bytes}); }
  double total() const;
  // "6.1 GiB (4 workers x ...: 4.0 GiB; serial verification: 2.1 GiB)"
  std::string describe() const;
};

// A run's estimate beside what it used, for its report.
struct MemoryUse {
  double estimate_bytes = 0;
  double resident_before_bytes = 0;  // when the estimate was made (libraries, data already loaded)
  double peak_resident_bytes = 0;    // at the end
};

// Throws ResourceExhausted naming the command, the estimate with its parts, what is available
// and `advice` (how to ask for less), when the estimate does not fit.
void require_memory(const std::string& command, const MemoryEstimate& estimate, const std::string& advice);

// What this process has resident now (/proc/self/statm), and the most it has had so far
// (getrusage), in bytes: a run reports both beside its estimate, so that the estimate can be checked.
double resident_bytes();
double peak_resident_bytes();

// 1536 -> "1.5 KiB", 3.2e9 -> "3.0 GiB".
std::string format_bytes(double bytes);

}  // namespace sparsgd
