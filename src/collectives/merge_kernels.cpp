// Highway kernels of the gTop-k merge; see merge_kernels.hpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "collectives/merge_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "collectives/merge_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::collectives::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
// share an index meets once, so each shared index is found once and in order. Shared indices are
// rare in gTop-k (the workers' selections mostly differ), so the exact positions are taken by a
// scalar walk of the two blocks only where a block pair holds one.
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
      if (HWY_UNLIKELY(!hn::AllFalse(du, hit))) {
        // The lanes of b that some lane of a equals, the same way round. Both blocks ascend, so the
        // s-th such lane of a pairs with the s-th of b: the positions are two compressions.
        const auto vb = hn::LoadU(du, b + j);
        auto hit_b = hn::Eq(vb, hn::Set(du, a[i]));
        for (size_t l = 1; l < kLanes; ++l) hit_b = hn::Or(hit_b, hn::Eq(vb, hn::Set(du, a[i + l])));
        // Room for whole vectors: a_pos / b_pos hold min(na, nb) + 1 entries, so spill into
        // scratch when the block could reach past them.
        if (count + kLanes <= shared_capacity) {
          hn::CompressStore(hn::Add(iota, hn::Set(du, static_cast<uint32_t>(i))), hit, du, a_pos + count);
          hn::CompressStore(hn::Add(iota, hn::Set(du, static_cast<uint32_t>(j))), hit_b, du, b_pos + count);
          count += hn::CountTrue(du, hit);
        } else {
          count = SharedTail(a, i, i + kLanes, b, j, j + kLanes, a_pos, b_pos, count);
        }
      }
      const uint32_t a_last = a[i + kLanes - 1];
      const uint32_t b_last = b[j + kLanes - 1];
      i += a_last <= b_last ? kLanes : 0;
      j += b_last <= a_last ? kLanes : 0;
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
    const auto keep64 = hn::MaskFromVec(hn::BitCast(d64, hn::PromoteTo(d64i, hn::VecFromMask(di, keep))));
    hn::CompressStore(pair, keep64, d64, out_pairs + written);
    if constexpr (kPositions) {
      hn::CompressStore(position, hn::RebindMask(du, keep), du, out_pos + written);
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
    hn::CompressStore(hn::LoadU(du, idx + i), hit, du, out + written);
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

}  // namespace sparsgd::collectives::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sparsgd::collectives {

HWY_EXPORT(FindSharedImpl);
HWY_EXPORT(CompactSelectedImpl);
HWY_EXPORT(IndicesWithKeyImpl);

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
