#pragma once
// A command's memory estimate beside what it used, as the "memory" object of its JSON report.

#include <nlohmann/json.hpp>

#include "sparsgd/training/memory.hpp"

namespace sparsgd::cli {

inline nlohmann::json memory_json(const MemoryUse& m) {
  return {{"estimate_bytes", m.estimate_bytes},
          {"resident_before_bytes", m.resident_before_bytes},
          {"peak_resident_bytes", m.peak_resident_bytes}};
}

}  // namespace sparsgd::cli
