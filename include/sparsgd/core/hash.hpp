#pragma once
// FNV-1a over bytes: the one fingerprint used for checksums (checkpoints, shared random-k indices)
// and for comparing results bitwise (benchmark verification). Not cryptographic.

#include <cstddef>
#include <cstdint>
#include <span>

namespace sparsgd {

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;

// `h` continues an earlier hash, so several arrays can be fingerprinted as one.
inline std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = kFnv1aOffset) {
  for (const std::byte b : bytes) {
    h ^= std::to_integer<std::uint64_t>(b);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace sparsgd
