#pragma once
// Vectorized blocks of the packed index coding (index_codec.hpp): 512 gaps a block, as 16 lanes of
// 32 rows. Lane l of a block holds gaps l, l + 16, l + 32, ... (row t, lane l: gap 16 t + l), each
// in `width` bits, packed least significant first into that lane's 32-bit words, and word q of
// lane l is word 16 q + l of the block: 16 width words, exactly `width` bits a gap. The layout is
// the same whatever the machine's vector width (a machine with 4, 8 or 16 lanes walks the 16 lanes
// in 4, 2 or 1 vectors), so ranks on different machines read each other's messages.

#include <cstddef>
#include <cstdint>

namespace sparsgd::index_codec::kernels {

inline constexpr std::size_t kBlockLanes = 16;
inline constexpr std::size_t kBlockRows = 32;
inline constexpr std::size_t kBlockGaps = kBlockLanes * kBlockRows;

// gaps[j] = idx[j] - idx[j - 1] - 1 for j in [0, count), idx[-1] being `previous` (all ones before
// the first index: then gaps[0] = idx[0]); returns the OR of the gaps, and false in *ascending where
// some idx[j] <= idx[j - 1].
std::uint32_t gaps_of(const std::uint32_t* idx, std::size_t count, std::uint32_t previous, std::uint32_t* gaps,
                      bool* ascending);

// Packs one block of kBlockGaps gaps, each below 2^width (width <= 31), into 16 width words at out.
void pack_block(const std::uint32_t* gaps, unsigned width, std::uint32_t* out);

// Unpacks one block (16 width words at `in`, any alignment) into kBlockGaps indices: index j =
// previous + 1 + gap j + (the gaps and ones before it in the block). Returns the OR of the gaps
// (so that the caller can check the width is the smallest), and sets *in_range false where an index
// is not below n. Requires width <= 31 and n <= 2^31: then no index wraps before one that is out of
// range.
std::uint32_t unpack_block(const unsigned char* in, unsigned width, std::uint32_t previous, std::uint32_t n,
                           std::uint32_t* out, bool* in_range);

}  // namespace sparsgd::index_codec::kernels
