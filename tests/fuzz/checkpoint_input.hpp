#pragma once
// Shared by fuzz_checkpoint and the seed writer: the fixed part of the checkpoint layout
// (core/checkpoint.hpp), needed to repair a mutated file's length field and checksum.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sparsgd/core/hash.hpp"

namespace sparsgd::fuzz {

inline constexpr std::size_t kCheckpointLengthAt = 12;  // after "SPGDCKPT" and the u32 version
inline constexpr std::size_t kCheckpointFixed = 28;     // magic, version, length, checksum

// The same bytes with the length field and the trailing FNV-1a made consistent with the payload,
// so that a mutation of the payload reaches the section parser instead of stopping at the checksum
// (as image fuzzers do with CRCs). Empty if the input cannot hold the fixed fields.
inline std::vector<std::byte> repair_checkpoint(std::span<const std::byte> file) {
  if (file.size() < kCheckpointFixed) return {};
  std::vector<std::byte> fixed(file.begin(), file.end());
  const std::uint64_t length = file.size() - kCheckpointFixed;
  std::memcpy(fixed.data() + kCheckpointLengthAt, &length, 8);
  const std::uint64_t sum = fnv1a(std::span(fixed).subspan(kCheckpointLengthAt + 8, length));
  std::memcpy(fixed.data() + fixed.size() - 8, &sum, 8);
  return fixed;
}

}  // namespace sparsgd::fuzz
