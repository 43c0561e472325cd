#pragma once
// Which build of the library this is. Results (bench JSON, a run's summary.json) carry it, so a
// figure can be traced to the code that made it, and ranks compare it at start-up
// (collectives::check_ranks_agree), so that a job mixing two builds fails with a message naming
// them instead of exchanging messages that one side reads differently.

#include <string>
#include <string_view>

namespace sparsgd {

// The project's version (CMake's project(VERSION)), e.g. "0.1.0".
std::string_view version();

// The git commit the library was built from, 12 hex digits, with "-dirty" when tracked files
// differed from it at build time; "unknown" when the sources were not a git checkout.
std::string_view source_revision();

// "0.1.0 (3d41750ab12c)": both in one line, as printed by `sparsgd --version`.
inline std::string build_identity() { return std::string(version()) + " (" + std::string(source_revision()) + ")"; }

}  // namespace sparsgd
