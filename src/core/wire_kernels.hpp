#pragma once
// Vectorized check of a sparse message's entries; see wire_kernels.cpp.

#include <cstddef>
#include <cstdint>

namespace sparsgd::wire {

// True when every index is below n and strictly above the one before, and every value is finite.
bool entries_valid(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n);

}  // namespace sparsgd::wire
