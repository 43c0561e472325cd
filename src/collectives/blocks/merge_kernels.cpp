// Highway kernels of the gTop-k merge; see merge_kernels.hpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "collectives/blocks/merge_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/compress_store-inl.hpp"

#include "collectives/blocks/merge_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::collectives::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using simd::HWY_NAMESPACE::CompressToWhole;

using DU = hn::ScalableTag<uint32_t>;
using DI = hn::ScalableTag<int32_t>;
using DF = hn::ScalableTag<float>;

// Scalar walk over a[i..na) x b[j..nb), appending the shared positions.
size_t SharedTail(const uint32_t* a, size_t i, size_t na, const uint32_t* b, size_t j, size_t nb, uint32_t* a_pos,
                  uint32_t* b_pos, size_t count) {
  while (i < na && j < nb) {
    const uint32_t x = a[i];
    const uint32_t y = b[j];
    a_pos[count] = static_cast<uint32_t>(i);
    b_pos[count] = static_cast<uint32_t>(j);
    count += x == y;
    i += x <= y;
    j += y <= x;
  }
  return count;
}

// Block intersection: a vector of a against every lane of a vector of b (one broadcast compare per
// lane of b), then the block with the smaller last element moves on. Every pair of blocks that can
// share an index meets once, so each shared index is found once and in order. The lanes of a that
// hit go out with the start of b's block, unconditionally (in gTop-k's later rounds a block pair
// holds a shared index as often as not, so a branch on it would mispredict); a second pass finds
// each one's lane in its block of b.
size_t FindSharedImpl(const uint32_t* HWY_RESTRICT a, size_t na, const uint32_t* HWY_RESTRICT b, size_t nb,
                      uint32_t* HWY_RESTRICT a_pos, uint32_t* HWY_RESTRICT b_pos) {
  const DU du;
  constexpr size_t kLanes = hn::MaxLanes(du);
  const size_t lanes = hn::Lanes(du);
  const size_t shared_capacity = HWY_MIN(na, nb) + 1;
  size_t i = 0, j = 0, count = 0;
  const auto iota = hn::Iota(du, 0);
  if (lanes == kLanes) {
    while (i + kLanes <= na && j + kLanes <= nb) {
      const auto va = hn::LoadU(du, a + i);
      auto hit = hn::Eq(va, hn::Set(du, b[j]));
      for (size_t l = 1; l < kLanes; ++l) hit = hn::Or(hit, hn::Eq(va, hn::Set(du, b[j + l])));
      // Room for whole vectors: a_pos / b_pos hold min(na, nb) + 1 entries, so near the end the
      // block is walked instead.
      if (HWY_LIKELY(count + kLanes <= shared_capacity)) {
        CompressToWhole(hn::Add(iota, hn::Set(du, static_cast<uint32_t>(i))), hit, du, a_pos + count);
        hn::StoreU(hn::Set(du, static_cast<uint32_t>(j)), du, b_pos + count);
        count += hn::CountTrue(du, hit);
      } else if (!hn::AllFalse(du, hit)) {
        const size_t before = count;
        count = SharedTail(a, i, i + kLanes, b, j, j + kLanes, a_pos, b_pos, count);
        for (size_t s = before; s < count; ++s) b_pos[s] = static_cast<uint32_t>(j);  // the block's start, as above
      }
      const uint32_t a_last = a[i + kLanes - 1];
      const uint32_t b_last = b[j + kLanes - 1];
      i += a_last <= b_last ? kLanes : 0;
      j += b_last <= a_last ? kLanes : 0;
    }
    // Each hit's lane in its block of b: the number of the block's indices below it.
    for (size_t s = 0; s < count; ++s) {
      const size_t start = b_pos[s];
      const auto below = hn::Lt(hn::LoadU(du, b + start), hn::Set(du, a[a_pos[s]]));
      b_pos[s] = static_cast<uint32_t>(start + hn::CountTrue(du, below));
    }
  }
  return SharedTail(a, i, na, b, j, nb, a_pos, b_pos, count);
}

// The selection key of entry i: keys[i], or, without a keys array, magnitude key + 1 of val[i]
// (sparse_merge.cpp reserves key 0 for excluded entries).
template <bool kFromValues>
struct KeySource {
  const uint32_t* keys;
  const float* val;
  template <class D>
  auto Load(D d, size_t i) const {
    if constexpr (kFromValues) {
      const auto bits = hn::BitCast(d, hn::LoadU(hn::RebindToFloat<D>(), val + i));
      return hn::Add(hn::And(bits, hn::Set(d, 0x7FFFFFFF)), hn::Set(d, 1));
    } else {
      return hn::BitCast(d, hn::LoadU(hn::RebindToUnsigned<D>(), keys + i));
    }
  }
  uint32_t Scalar(size_t i) const {
    if constexpr (kFromValues) {
      uint32_t bits;
      __builtin_memcpy(&bits, val + i, 4);
      return (bits & 0x7FFFFFFFu) + 1;
    } else {
      return keys[i];
    }
  }
};

// A kept entry goes out as one 64-bit pair, index above value bits, so that the merge by index
// moves and compares one word per entry. The keep mask is made over 32-bit lanes (half vectors, one
// per 64-bit lane) and widened for the pairs.
template <bool kFromValues, bool kPositions>
size_t CompactLoop(KeySource<kFromValues> keys, size_t n, const uint32_t* HWY_RESTRICT idx,
                   const float* HWY_RESTRICT val, uint32_t threshold, uint32_t tie_cutoff,
                   uint64_t* HWY_RESTRICT out_pairs, uint32_t* HWY_RESTRICT out_pos) {
  const hn::ScalableTag<uint64_t> d64;
  const hn::Rebind<int64_t, decltype(d64)> d64i;
  const hn::Rebind<uint32_t, decltype(d64)> du;
  const hn::Rebind<int32_t, decltype(d64)> di;
  const hn::Rebind<float, decltype(d64)> df;
  const size_t lanes = hn::Lanes(d64);
  // Keys are below 2^31, so signed compares order them; indices may use all 32 bits, so they are
  // compared with the sign bit flipped.
  const auto vthreshold = hn::Set(di, static_cast<int32_t>(threshold));
  const auto flip = hn::Set(du, 0x80000000u);
  const auto vcutoff = hn::BitCast(di, hn::Set(du, tie_cutoff ^ 0x80000000u));
  const auto step = hn::Set(du, static_cast<uint32_t>(lanes));
  auto position = hn::Iota(du, 0);
  size_t written = 0;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto key = keys.Load(di, i);
    const auto index = hn::LoadU(du, idx + i);
    const auto beyond_cutoff = hn::Gt(hn::BitCast(di, hn::Xor(index, flip)), vcutoff);
    const auto keep = hn::Or(hn::Gt(key, vthreshold), hn::AndNot(beyond_cutoff, hn::Eq(key, vthreshold)));
    const auto pair = hn::Or(hn::ShiftLeft<32>(hn::PromoteTo(d64, index)),
                             hn::PromoteTo(d64, hn::BitCast(du, hn::LoadU(df, val + i))));
#if HWY_TARGET <= HWY_AVX3
    // Masks are bits here, one per lane whatever its width: the same eight bits serve the pairs.
    const hn::Mask512<uint64_t> keep64{keep.raw};
#else
    const auto keep64 = hn::MaskFromVec(hn::BitCast(d64, hn::PromoteTo(d64i, hn::VecFromMask(di, keep))));
#endif
    CompressToWhole(pair, keep64, d64, out_pairs + written);
    if constexpr (kPositions) {
      CompressToWhole(position, hn::RebindMask(du, keep), du, out_pos + written);
      position = hn::Add(position, step);
    }
    written += hn::CountTrue(d64, keep64);
  }
  for (; i < n; ++i) {
    const uint32_t key = keys.Scalar(i);
    uint32_t bits;
    __builtin_memcpy(&bits, val + i, 4);
    out_pairs[written] = (uint64_t{idx[i]} << 32) | bits;
    if constexpr (kPositions) out_pos[written] = static_cast<uint32_t>(i);
    written += key > threshold || (key == threshold && idx[i] <= tie_cutoff);
  }
  return written;
}

size_t CompactSelectedImpl(const uint32_t* HWY_RESTRICT keys, size_t n, const uint32_t* HWY_RESTRICT idx,
                           const float* HWY_RESTRICT val, uint32_t threshold, uint32_t tie_cutoff,
                           uint64_t* HWY_RESTRICT out_pairs, uint32_t* HWY_RESTRICT out_pos) {
  const KeySource<true> from_values{keys, val};
  const KeySource<false> from_keys{keys, val};
  if (out_pos == nullptr) {
    if (keys == nullptr) {
      return CompactLoop<true, false>(from_values, n, idx, val, threshold, tie_cutoff, out_pairs, out_pos);
    }
    return CompactLoop<false, false>(from_keys, n, idx, val, threshold, tie_cutoff, out_pairs, out_pos);
  }
  if (keys == nullptr) {
    return CompactLoop<true, true>(from_values, n, idx, val, threshold, tie_cutoff, out_pairs, out_pos);
  }
  return CompactLoop<false, true>(from_keys, n, idx, val, threshold, tie_cutoff, out_pairs, out_pos);
}

template <bool kFromValues>
size_t IndicesWithKeyLoop(KeySource<kFromValues> keys, size_t n, const uint32_t* HWY_RESTRICT idx, uint32_t key,
                          uint32_t* HWY_RESTRICT out) {
  const DU du;
  const size_t lanes = hn::Lanes(du);
  const auto vkey = hn::Set(du, key);
  size_t written = 0;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto hit = hn::Eq(keys.Load(du, i), vkey);
    CompressToWhole(hn::LoadU(du, idx + i), hit, du, out + written);
    written += hn::CountTrue(du, hit);
  }
  for (; i < n; ++i) {
    out[written] = idx[i];
    written += keys.Scalar(i) == key;
  }
  return written;
}

size_t IndicesWithKeyImpl(const uint32_t* HWY_RESTRICT keys, const float* HWY_RESTRICT val, size_t n,
                          const uint32_t* HWY_RESTRICT idx, uint32_t key, uint32_t* HWY_RESTRICT out) {
  if (keys == nullptr) return IndicesWithKeyLoop<true>({keys, val}, n, idx, key, out);
  return IndicesWithKeyLoop<false>({keys, val}, n, idx, key, out);
}

// Where the first `t` outputs of a merge of the ascending arrays a and b (no value in both) end in
// `a`: the smallest split with every a[< split] and b[< t - split] below the rest.
size_t CoRank(const uint64_t* a, size_t na, const uint64_t* b, size_t nb, size_t t) {
  size_t lo = t > nb ? t - nb : 0;
  size_t hi = HWY_MIN(t, na);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (a[mid] < b[t - mid - 1]) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// One merge, cut by co-rank into parts of nearly equal output that advance side by side: a merge is
// bound by the latency of its loop-carried chain, so independent ones fill the core. A part reads
// on past its own entries, into the next part's or the padding: they exceed everything in it, so
// its first `size` outputs are its own. Pairs order as their indices do (the index is the high
// word), so one 64-bit compare decides.
struct MergePart {
  const uint64_t* a;
  const uint64_t* b;
  size_t out;   // where its first output goes
  size_t size;  // how many outputs
};

// Scalar parts: a branch-free step (load, compare, advance). Each part is three pointers and the
// values go at a fixed offset from the indices, so that everything stays in registers: a part
// spilled to the stack runs through a store and a reload per step, twice as slow (why the side each
// entry came from is not recorded here either; TopkMerger::positions works it out later).
template <size_t kParts>
void MergeScalarParts(const MergePart* parts, uint32_t* out_indices, uint32_t* out_values) {
  struct Chain {
    const uint64_t* a;
    const uint64_t* b;
    uint32_t* out;  // where the next index goes
  };
  const uintptr_t values_offset = reinterpret_cast<uintptr_t>(out_values) - reinterpret_cast<uintptr_t>(out_indices);
  auto step = [values_offset](Chain& c) {
    const uint64_t x = *c.a, y = *c.b;
    const uint64_t take_a = x < y;
    const uint64_t v = HWY_MIN(x, y);
    *c.out = static_cast<uint32_t>(v >> 32);
    *reinterpret_cast<uint32_t*>(reinterpret_cast<uintptr_t>(c.out) + values_offset) = static_cast<uint32_t>(v);
    c.a += take_a;
    c.b += take_a ^ 1u;
    ++c.out;
  };
  Chain chains[kParts];
  uint32_t* ends[kParts];
  size_t shortest = parts[0].size;
  for (size_t c = 0; c < kParts; ++c) {
    chains[c] = {parts[c].a, parts[c].b, out_indices + parts[c].out};
    ends[c] = out_indices + parts[c].out + parts[c].size;
    shortest = HWY_MIN(shortest, parts[c].size);
  }
  for (size_t s = 0; s < shortest; ++s) {
#pragma GCC unroll 4
    for (size_t c = 0; c < kParts; ++c) step(chains[c]);
  }
  for (size_t c = 0; c < kParts; ++c) {
    while (chains[c].out != ends[c]) step(chains[c]);
  }
}

#if HWY_TARGET <= HWY_AVX3
// Eight pairs at a time (AVX-512): the classic vector merge. A vector of carried pairs (sorted) meets
// the next eight of the side whose next pair is smaller; a bitonic network splits the sixteen into
// the eight smallest, which go out, and the eight largest, carried on. About three times the scalar
// step's speed; the network's latency is hidden by running parts side by side.
using D64 = hn::Full512<uint64_t>;
using V64 = hn::Vec512<uint64_t>;

// Sorts a bitonic vector: compare-exchange at distances 4, 2 and 1.
HWY_INLINE V64 SortBitonic(V64 v) {
  const D64 d;
  V64 other = hn::ConcatLowerUpper(d, v, v);
  v = hn::ConcatUpperLower(d, hn::Max(v, other), hn::Min(v, other));
  other = hn::SwapAdjacentBlocks(v);
  v = hn::OddEvenBlocks(hn::Max(v, other), hn::Min(v, other));
  other = hn::Shuffle01(v);
  return hn::OddEven(hn::Max(v, other), hn::Min(v, other));
}

struct VectorChain {
  const uint64_t* a;
  const uint64_t* b;
  uint32_t* out;
  size_t left;  // outputs still to write
  V64 carry;
};

// The eight smallest of carry and next (both ascending), in order; carry keeps the rest.
HWY_INLINE V64 MergeStep(V64& carry, V64 next) {
  const D64 d;
  const V64 reversed = hn::Reverse(d, next);
  const V64 low = hn::Min(carry, reversed);
  carry = SortBitonic(hn::Max(carry, reversed));
  return SortBitonic(low);
}

HWY_INLINE void StorePairs(V64 pairs, uint32_t* indices, uintptr_t values_offset, size_t count) {
  const hn::Rebind<uint32_t, D64> d32;
  const auto index = hn::TruncateTo(d32, hn::ShiftRight<32>(pairs));
  const auto value = hn::TruncateTo(d32, pairs);
  auto* values = reinterpret_cast<uint32_t*>(reinterpret_cast<uintptr_t>(indices) + values_offset);
  if (HWY_LIKELY(count == 8)) {
    hn::StoreU(index, d32, indices);
    hn::StoreU(value, d32, values);
  } else {
    const auto first = hn::FirstN(d32, count);
    hn::BlendedStore(index, first, d32, indices);
    hn::BlendedStore(value, first, d32, values);
  }
}

// Merges `next` into the chain's carry and writes out the eight smallest (fewer at its end).
HWY_INLINE void EmitMerged(VectorChain& c, V64 next, uintptr_t values_offset) {
  const size_t count = HWY_MIN(c.left, size_t{8});
  StorePairs(MergeStep(c.carry, next), c.out, values_offset, count);
  c.out += count;
  c.left -= count;
}

HWY_INLINE void VectorStep(VectorChain& c, uintptr_t values_offset) {
  const D64 d;
  const bool take_a = *c.a < *c.b;
  const V64 next = hn::LoadU(d, take_a ? c.a : c.b);
  c.a += take_a ? 8 : 0;
  c.b += take_a ? 0 : 8;
  EmitMerged(c, next, values_offset);
}

template <size_t kParts>
void MergeVectorParts(const MergePart* parts, uint32_t* out_indices, uint32_t* out_values) {
  const D64 d;
  const uintptr_t values_offset = reinterpret_cast<uintptr_t>(out_values) - reinterpret_cast<uintptr_t>(out_indices);
  VectorChain chains[kParts];
  size_t rounds = ~size_t{0};
  for (size_t c = 0; c < kParts; ++c) {
    // The first eight of the merge are among the first eight of each side.
    VectorChain& chain = chains[c];
    chain.carry = hn::LoadU(d, parts[c].a);
    chain.a = parts[c].a + 8;
    chain.b = parts[c].b + 8;
    chain.out = out_indices + parts[c].out;
    chain.left = parts[c].size;
    EmitMerged(chain, hn::LoadU(d, parts[c].b), values_offset);
    rounds = HWY_MIN(rounds, chain.left / 8);
  }
  for (size_t s = 0; s < rounds; ++s) {
    for (size_t c = 0; c < kParts; ++c) VectorStep(chains[c], values_offset);
  }
  for (size_t c = 0; c < kParts; ++c) {
    while (chains[c].left > 0) VectorStep(chains[c], values_offset);
  }
}
#endif  // HWY_TARGET <= HWY_AVX3

void MergePairsImpl(const uint64_t* HWY_RESTRICT a, size_t na, const uint64_t* HWY_RESTRICT b, size_t nb,
                    uint32_t* HWY_RESTRICT out_indices, uint32_t* HWY_RESTRICT out_values) {
  const size_t m = na + nb;
  constexpr size_t kParts = 3;
  MergePart parts[kParts];
  for (size_t c = 0; c < kParts; ++c) {
    const size_t start = m * c / kParts;
    const size_t split = CoRank(a, na, b, nb, start);
    parts[c] = {a + split, b + (start - split), start, m * (c + 1) / kParts - start};
  }
#if HWY_TARGET <= HWY_AVX3
  if (m >= 64) {  // every part holds at least one whole vector
    MergeVectorParts<kParts>(parts, out_indices, out_values);
    return;
  }
#endif
  MergeScalarParts<kParts>(parts, out_indices, out_values);
}

}  // namespace sparsgd::collectives::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sparsgd::collectives {

HWY_EXPORT(FindSharedImpl);
HWY_EXPORT(CompactSelectedImpl);
HWY_EXPORT(IndicesWithKeyImpl);
HWY_EXPORT(MergePairsImpl);

void merge_pairs(const std::uint64_t* a, std::size_t na, const std::uint64_t* b, std::size_t nb,
                 std::uint32_t* out_indices, float* out_values) {
  HWY_DYNAMIC_DISPATCH(MergePairsImpl)(a, na, b, nb, out_indices, reinterpret_cast<std::uint32_t*>(out_values));
}

std::size_t find_shared_indices(std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                                std::uint32_t* a_pos, std::uint32_t* b_pos) {
  return HWY_DYNAMIC_DISPATCH(FindSharedImpl)(a.data(), a.size(), b.data(), b.size(), a_pos, b_pos);
}

std::size_t compact_selected(SelectionKeys keys, const std::uint32_t* idx, const float* val, std::uint32_t threshold,
                             std::uint32_t tie_cutoff, std::uint64_t* out_pairs, std::uint32_t* out_pos) {
  return HWY_DYNAMIC_DISPATCH(CompactSelectedImpl)(keys.keys, keys.count, idx, val, threshold, tie_cutoff, out_pairs,
                                                   out_pos);
}

std::size_t indices_with_key(SelectionKeys keys, const float* val, const std::uint32_t* idx, std::uint32_t key,
                             std::uint32_t* out) {
  return HWY_DYNAMIC_DISPATCH(IndicesWithKeyImpl)(keys.keys, val, keys.count, idx, key, out);
}

}  // namespace sparsgd::collectives
#endif  // HWY_ONCE
