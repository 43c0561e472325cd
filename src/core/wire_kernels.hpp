#pragma once
// Vectorized check of a sparse message's entries; see wire_kernels.cpp.

#include <cstddef>
#include <cstdint>

namespace sparsgd::wire {

// True when every index is below n and strictly above the one before, and every value is finite.
bool entries_valid(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n);

// The first entry that breaks those rules, and how, for an error message: the vectorized check
// above runs first, and this scalar walk only where it failed.
struct EntryFault {
  enum Kind { none, index_out_of_range, not_ascending, not_finite } kind = none;
  std::size_t position = 0;
};
EntryFault first_invalid_entry(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n);

}  // namespace sparsgd::wire
