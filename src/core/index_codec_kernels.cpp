// The packed index coding's block kernels (index_codec_kernels.hpp), with Highway's runtime
// dispatch: every compressed message passes through them twice, so they run at the machine's
// vector width.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/index_codec_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <type_traits>

#include "core/index_codec_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::index_codec::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes: the block's lane count, whatever the target.
using DU = hn::CappedTag<uint32_t, kBlockLanes>;
using DI = hn::Rebind<int32_t, DU>;

uint32_t GapsOfImpl(const uint32_t* HWY_RESTRICT idx, size_t count, uint32_t previous, uint32_t* HWY_RESTRICT gaps,
                    bool* ascending) {
  const DU du;
  const DI di;
  const size_t lanes = hn::Lanes(du);
  const auto one = hn::Set(du, 1u);
  const auto flip = hn::Set(du, 0x80000000u);  // unsigned order as signed
  auto any = hn::Zero(du);
  auto descending = hn::FirstN(di, 0);  // a mask: some index not above the one before
  size_t j = 0;
  // The first lanes by hand: their predecessor is `previous`, then idx.
  for (; j < count && j < lanes; ++j) {
    const uint32_t before = j == 0 ? previous : idx[j - 1];
    gaps[j] = idx[j] - before - 1;
    any = hn::Or(any, hn::Set(du, gaps[j]));
    // previous = all ones stands for "none": every index is above it.
    const bool up = (j == 0 && previous == 0xffffffffu) || idx[j] > before;
    if (!up) descending = hn::FirstN(di, 1);
  }
  for (; j + lanes <= count; j += lanes) {
    const auto current = hn::LoadU(du, idx + j);
    const auto before = hn::LoadU(du, idx + j - 1);
    const auto gap = hn::Sub(hn::Sub(current, before), one);
    hn::StoreU(gap, du, gaps + j);
    any = hn::Or(any, gap);
    const auto up = hn::Gt(hn::BitCast(di, hn::Xor(current, flip)), hn::BitCast(di, hn::Xor(before, flip)));
    descending = hn::Or(descending, hn::Not(up));
  }
  uint32_t any_scalar = 0;
  bool down = !hn::AllFalse(di, descending);
  for (; j < count; ++j) {
    gaps[j] = idx[j] - idx[j - 1] - 1;
    any_scalar |= gaps[j];
    down = down || idx[j] <= idx[j - 1];
  }
  *ascending = !down;
  HWY_ALIGN uint32_t lanes_or[kBlockLanes];
  hn::Store(any, du, lanes_or);
  for (size_t l = 0; l < lanes; ++l) any_scalar |= lanes_or[l];
  return any_scalar;
}

void PackBlockImpl(const uint32_t* HWY_RESTRICT gaps, unsigned width, uint32_t* HWY_RESTRICT out) {
  if (width == 0) return;
  const DU du;
  const size_t lanes = hn::Lanes(du);
  for (size_t o = 0; o < kBlockLanes; o += lanes) {
    auto word = hn::Zero(du);
    unsigned used = 0;  // bits of `word` filled
    size_t q = 0;
    for (size_t t = 0; t < kBlockRows; ++t) {
      const auto gap = hn::LoadU(du, gaps + kBlockLanes * t + o);
      word = hn::Or(word, hn::ShiftLeftSame(gap, static_cast<int>(used)));
      used += width;
      if (used >= 32) {
        hn::StoreU(word, du, out + kBlockLanes * q + o);
        ++q;
        used -= 32;
        // The gap's bits that did not fit start the next word.
        word = used > 0 ? hn::ShiftRightSame(gap, static_cast<int>(width - used)) : hn::Zero(du);
      }
    }
  }
}

uint32_t UnpackBlockImpl(const unsigned char* HWY_RESTRICT in, unsigned width, uint32_t previous, uint32_t n,
                         uint32_t* HWY_RESTRICT out, bool* in_range) {
  const DU du;
  const size_t lanes = hn::Lanes(du);
  const auto* words = reinterpret_cast<const uint32_t*>(in);
  const auto mask = hn::Set(du, width == 0 ? 0u : 0xffffffffu >> (32 - width));
  const auto one = hn::Set(du, 1u);
  // Inclusive prefix sums within a vector: log2(lanes) steps of "add the lane `distance` below"
  // (lane l takes lane l - distance; the lanes below distance are zeroed).
  HWY_ALIGN static constexpr int32_t kBelow[4][kBlockLanes] = {
      {0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
      {0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
      {0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7}};
  size_t steps = 0;
  while ((size_t{1} << steps) < lanes) ++steps;
  HWY_ALIGN int32_t last_index[kBlockLanes];
  for (size_t l = 0; l < lanes; ++l) last_index[l] = static_cast<int32_t>(lanes - 1);
  const auto broadcast_last = hn::SetTableIndices(du, last_index);
  auto base = hn::Set(du, previous);
  auto any = hn::Zero(du);
  auto largest = hn::Zero(du);
  for (size_t t = 0; t < kBlockRows; ++t) {
    const size_t bit = t * width;
    const size_t q = bit / 32;
    const unsigned shift = bit % 32;
    for (size_t o = 0; o < kBlockLanes; o += lanes) {
      // A block of width 0 has no words at all: nothing may be read.
      auto gap = width == 0 ? hn::Zero(du)
                            : hn::ShiftRightSame(hn::LoadU(du, words + kBlockLanes * q + o), static_cast<int>(shift));
      if (shift + width > 32) {
        gap = hn::Or(gap, hn::ShiftLeftSame(hn::LoadU(du, words + kBlockLanes * (q + 1) + o), static_cast<int>(32 - shift)));
      }
      gap = hn::And(gap, mask);
      any = hn::Or(any, gap);
      auto step = hn::Add(gap, one);
      for (size_t s = 0, distance = 1; s < steps; ++s, distance *= 2) {
        const auto below = hn::TableLookupLanes(step, hn::SetTableIndices(du, kBelow[s]));
        step = hn::Add(step, hn::IfThenZeroElse(hn::FirstN(du, distance), below));
      }
      const auto index = hn::Add(base, step);
      hn::StoreU(index, du, out + kBlockLanes * t + o);
      // The first index out of range is exact (see the header), so the largest index tells.
      largest = hn::Max(largest, index);
      base = hn::TableLookupLanes(index, broadcast_last);
    }
  }
  HWY_ALIGN uint32_t lanes_or[kBlockLanes];
  HWY_ALIGN uint32_t lanes_max[kBlockLanes];
  hn::Store(any, du, lanes_or);
  hn::Store(largest, du, lanes_max);
  uint32_t any_scalar = 0, max_scalar = 0;
  for (size_t l = 0; l < lanes; ++l) {
    any_scalar |= lanes_or[l];
    max_scalar = lanes_max[l] > max_scalar ? lanes_max[l] : max_scalar;
  }
  *in_range = max_scalar < n;
  return any_scalar;
}

}  // namespace sparsgd::index_codec::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sparsgd::index_codec::kernels {

HWY_EXPORT(GapsOfImpl);
HWY_EXPORT(PackBlockImpl);
HWY_EXPORT(UnpackBlockImpl);

std::uint32_t gaps_of(const std::uint32_t* idx, std::size_t count, std::uint32_t previous, std::uint32_t* gaps,
                      bool* ascending) {
  return HWY_DYNAMIC_DISPATCH(GapsOfImpl)(idx, count, previous, gaps, ascending);
}

void pack_block(const std::uint32_t* gaps, unsigned width, std::uint32_t* out) {
  HWY_DYNAMIC_DISPATCH(PackBlockImpl)(gaps, width, out);
}

std::uint32_t unpack_block(const unsigned char* in, unsigned width, std::uint32_t previous, std::uint32_t n,
                           std::uint32_t* out, bool* in_range) {
  return HWY_DYNAMIC_DISPATCH(UnpackBlockImpl)(in, width, previous, n, out, in_range);
}

}  // namespace sparsgd::index_codec::kernels
#endif  // HWY_ONCE
