#pragma once
// A fault to inject on purpose, for the reliability suite and for users who want to see what a
// failure looks like before it happens for real: `--inject-fault KIND:RANK:ITERATION`, or
// KIND:RANK:ITERATION+ for that iteration and every one after it.
//   nan, inf          the first element of the first parameter's gradient becomes NaN / Inf
//   throw             the worker fails with an error (as a crashing kernel or a full disk would)
//   hang              the worker stops answering for three timeouts, then fails
//   crash-checkpoint  the worker dies (exit status 75) half way through writing its first
//                     checkpoint at or after ITERATION, leaving a torn temporary file
// Torch-free, so that any layer can parse and validate it.

#include <cstdint>
#include <optional>
#include <string>

namespace sparsgd {

struct FaultPlan {
  enum class Kind { nan, inf, thrown, hang, crash_checkpoint };
  Kind kind = Kind::thrown;
  int rank = 0;
  std::uint64_t iteration = 0;
  bool onward = false;  // every iteration from `iteration` on

  bool at(int r, std::uint64_t i) const { return r == rank && (onward ? i >= iteration : i == iteration); }
};

// Empty spec: no fault. Throws InvalidArgument with the expected syntax on anything else malformed.
std::optional<FaultPlan> parse_fault_plan(const std::string& spec);

inline constexpr int kCrashCheckpointExitStatus = 75;

}  // namespace sparsgd
