#pragma once
// The k-th largest magnitude key (select/magnitude.hpp) of n floats in device memory, by a radix
// select over the key's 31 bits: three histogram passes (bits 30-20, 19-9 and 8-0), each counting
// only the entries whose higher bits equal what the passes before chose, with a scan of the bins on
// the host between them (16 KB a pass). Three read passes in all, whatever k and the ties; the
// exact top-k then keeps the entries above the key and the first ties by index. Its CPU twin is
// select::kth_largest_key_radix: the two agree on every input.

#include <cstddef>
#include <cstdint>

namespace sparsgd::cuda {

struct KthKey {
  std::uint32_t key = 0;
  std::size_t greater = 0;  // entries with a larger key
};

// device_values: n floats in memory of the current device (magnitude keys stored as int32 work
// too: their bits are their own keys). stream: a cudaStream_t, or nullptr for the default stream.
// Waits for the result. Throws InvalidArgument unless 1 <= k <= n, and sparsgd::Error with CUDA's
// message when a CUDA call fails.
KthKey kth_largest_key(const float* device_values, std::size_t n, std::size_t k, void* stream = nullptr);

}  // namespace sparsgd::cuda
