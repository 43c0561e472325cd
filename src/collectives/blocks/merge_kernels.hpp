#pragma once
// Vectorized passes of the gTop-k merge (sparse_merge.cpp), with Highway's runtime dispatch like
// the selection kernels: compiled for every x86-64 target and the best one picked on first call.

#include <cstddef>
#include <cstdint>
#include <span>

namespace sparsgd::collectives {

// Extra slots past n that compact_selected may write (whole vectors), whichever target runs.
inline constexpr std::size_t kCompactPadding = 64;

// The positions of the indices that two strictly ascending arrays share: a[a_pos[s]] == b[b_pos[s]]
// for s < the returned count, in ascending order. a_pos and b_pos need min(a.size(), b.size()) + 1
// slots.
std::size_t find_shared_indices(std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                                std::uint32_t* a_pos, std::uint32_t* b_pos);

// The selection keys of n entries: keys[0..count), or, where `keys` is null, magnitude key + 1 of
// each entry's value, made on the fly (key 0 is left for entries excluded from the selection).
struct SelectionKeys {
  const std::uint32_t* keys = nullptr;
  std::size_t count = 0;
};

// Keeps entry i (index idx[i], value val[i]) if key i > threshold, or key i == threshold and
// idx[i] <= tie_cutoff; writes the kept entries in order as pairs (index << 32 | the value's bits)
// and, where out_pos is not null, their positions i; returns how many. Keys must be below 2^31. The
// outputs need keys.count + kCompactPadding slots.
std::size_t compact_selected(SelectionKeys keys, const std::uint32_t* idx, const float* val, std::uint32_t threshold,
                             std::uint32_t tie_cutoff, std::uint64_t* out_pairs, std::uint32_t* out_pos);

// Pairs past the end of each input that merge_pairs may read; they must exceed every valid pair.
inline constexpr std::size_t kMergePadding = 24;

// Merges the ascending arrays of pairs (index << 32 | the value's bits) a[0..na) and b[0..nb), no
// pair in both, into out_indices / out_values[0..na + nb). Each array must be followed by
// kMergePadding pairs above every valid one (all ones will do).
void merge_pairs(const std::uint64_t* a, std::size_t na, const std::uint64_t* b, std::size_t nb,
                 std::uint32_t* out_indices, float* out_values);

// Writes idx[i] for every i whose key equals `key`, in order, and returns how many. `out` needs
// keys.count + kCompactPadding slots.
std::size_t indices_with_key(SelectionKeys keys, const float* val, const std::uint32_t* idx, std::uint32_t key,
                             std::uint32_t* out);

}  // namespace sparsgd::collectives
