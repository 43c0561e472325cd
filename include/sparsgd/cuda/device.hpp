#pragma once
// Which CUDA devices this process can use. Safe to call on a machine with no GPU or no driver:
// it answers, it does not throw, so that callers (and tests) can decide and say why.

#include <string>

namespace sparsgd::cuda {

// Number of CUDA devices visible to this process; 0 when there is no driver or no device.
int device_count() noexcept;

// Why device_count() is 0 ("no CUDA driver: ...", "no CUDA-capable device"), or "" when it is not.
std::string unavailable_reason();

}  // namespace sparsgd::cuda
