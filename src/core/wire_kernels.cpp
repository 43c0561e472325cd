// The vectorized check of a sparse message's entries (wire.cpp): every received message passes
// it before use, so it runs at the width of the machine (Highway runtime dispatch) rather than the
// SSE2 baseline that compiled loops get.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/wire_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>

#include "core/wire_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::wire::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

bool EntriesValidImpl(const uint32_t* HWY_RESTRICT idx, const float* HWY_RESTRICT val, size_t count, uint32_t n) {
  const hn::ScalableTag<int32_t> di;
  const size_t lanes = hn::Lanes(di);
  // Unsigned order through signed compares: flip the sign bit of both sides.
  const auto flip = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const auto limit = hn::Set(di, static_cast<int32_t>(n ^ 0x80000000u));
  const auto sign_off = hn::Set(di, 0x7FFFFFFF);
  const auto infinity = hn::Set(di, 0x7F800000);
  const auto* ints = reinterpret_cast<const int32_t*>(idx);
  const auto* bits = reinterpret_cast<const int32_t*>(val);
  auto bad = hn::Zero(di);
  size_t i = 0;
  if (count > lanes) {
    // Ascending: each vector against the same vector shifted one entry back (an unaligned load).
    for (i = 1; i + lanes <= count; i += lanes) {
      const auto here = hn::Xor(hn::LoadU(di, ints + i), flip);
      const auto before = hn::Xor(hn::LoadU(di, ints + i - 1), flip);
      const auto key = hn::And(hn::LoadU(di, bits + i), sign_off);
      const auto wrong = hn::Or(hn::Or(hn::VecFromMask(di, hn::Not(hn::Gt(here, before))),
                                       hn::VecFromMask(di, hn::Not(hn::Lt(here, limit)))),
                                hn::VecFromMask(di, hn::Not(hn::Lt(key, infinity))));
      bad = hn::Or(bad, wrong);
    }
  } else {
    i = count > 0 ? 1 : 0;
  }
  if (!hn::AllTrue(di, hn::Eq(bad, hn::Zero(di)))) return false;
  // Entry 0 and the tail.
  auto scalar_ok = [&](size_t j) {
    uint32_t b;
    __builtin_memcpy(&b, val + j, 4);
    return idx[j] < n && (b & 0x7FFFFFFFu) < 0x7F800000u && (j == 0 || idx[j] > idx[j - 1]);
  };
  if (count > 0 && !scalar_ok(0)) return false;
  for (; i < count; ++i) {
    if (!scalar_ok(i)) return false;
  }
  return true;
}

}  // namespace sparsgd::wire::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sparsgd::wire {

HWY_EXPORT(EntriesValidImpl);

bool entries_valid(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n) {
  return HWY_DYNAMIC_DISPATCH(EntriesValidImpl)(idx, val, count, n);
}

EntryFault first_invalid_entry(const std::uint32_t* idx, const float* val, std::size_t count, std::uint32_t n) {
  for (std::size_t i = 0; i < count; ++i) {
    if (idx[i] >= n) return {EntryFault::index_out_of_range, i};
    if (i > 0 && idx[i] <= idx[i - 1]) return {EntryFault::not_ascending, i};
    if (!std::isfinite(val[i])) return {EntryFault::not_finite, i};
  }
  return {};
}

}  // namespace sparsgd::wire
#endif  // HWY_ONCE
