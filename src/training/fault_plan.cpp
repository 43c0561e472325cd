#include "sparsgd/training/fault_plan.hpp"

#include <charconv>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace sparsgd {
namespace {

template <typename T>
bool parse_number(const std::string& text, T& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::optional<FaultPlan> parse_fault_plan(const std::string& spec) {
  if (spec.empty()) return std::nullopt;
  const std::string usage = "--inject-fault must be KIND:RANK:ITERATION[+] with KIND nan, inf, throw, hang or "
                            "crash-checkpoint, got '" + spec + "'";
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t colon; (colon = spec.find(':', begin)) != std::string::npos; begin = colon + 1) {
    parts.push_back(spec.substr(begin, colon - begin));
  }
  parts.push_back(spec.substr(begin));
  if (parts.size() != 3) throw InvalidArgument(usage);
  FaultPlan plan;
  if (parts[0] == "nan") {
    plan.kind = FaultPlan::Kind::nan;
  } else if (parts[0] == "inf") {
    plan.kind = FaultPlan::Kind::inf;
  } else if (parts[0] == "throw") {
    plan.kind = FaultPlan::Kind::thrown;
  } else if (parts[0] == "hang") {
    plan.kind = FaultPlan::Kind::hang;
  } else if (parts[0] == "crash-checkpoint") {
    plan.kind = FaultPlan::Kind::crash_checkpoint;
  } else {
    throw InvalidArgument(usage);
  }
  if (!parts[2].empty() && parts[2].back() == '+') {
    plan.onward = true;
    parts[2].pop_back();
  }
  if (!parse_number(parts[1], plan.rank) || plan.rank < 0 || !parse_number(parts[2], plan.iteration)) {
    throw InvalidArgument(usage);
  }
  return plan;
}

}  // namespace sparsgd
