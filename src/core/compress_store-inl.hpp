// Per-target helper for Highway kernels: include it after hwy/foreach_target.h (it is compiled once
// per target, like the kernels that use it).
//
// Why not hn::CompressStore: on AVX-512, Highway 1.0 stores with the memory form of vpcompress,
// which AMD Zen 4 runs in microcode, dozens of times slower than compressing in a register and
// storing the whole vector (measured: the gTop-k merge of two 25,000-entry sets took 3.4x longer).
// Callers of CompressToWhole must have room for a whole vector at `out`; the lanes past the count
// are left with unspecified values.

#if defined(SPARSGD_CORE_COMPRESS_STORE_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPARSGD_CORE_COMPRESS_STORE_INL_HPP_
#undef SPARSGD_CORE_COMPRESS_STORE_INL_HPP_
#else
#define SPARSGD_CORE_COMPRESS_STORE_INL_HPP_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::simd::HWY_NAMESPACE {

// Writes the lanes of v where mask is true to out[0..count) and returns count; writes a whole
// vector (Lanes(d) elements) at out.
template <class D, class V, class M>
HWY_INLINE size_t CompressToWhole(V v, M mask, D d, hwy::HWY_NAMESPACE::TFromD<D>* HWY_RESTRICT out) {
  namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET <= HWY_AVX3
  // Highway 1.0 compresses 64-bit lanes through a 2 KiB table that it copies onto the stack at
  // every call; the native instruction needs none.
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::BitCast(du, v);
    if constexpr (hn::MaxLanes(d) == 8) {
      hn::StoreU(hn::BitCast(d, hn::Vec512<uint64_t>{_mm512_maskz_compress_epi64(mask.raw, bits.raw)}), d, out);
      return hn::CountTrue(d, mask);
    } else if constexpr (hn::MaxLanes(d) == 4) {
      hn::StoreU(hn::BitCast(d, hn::Vec256<uint64_t>{_mm256_maskz_compress_epi64(mask.raw, bits.raw)}), d, out);
      return hn::CountTrue(d, mask);
    }
  }
#endif
  hn::StoreU(hn::Compress(v, mask), d, out);
  return hn::CountTrue(d, mask);
}

}  // namespace sparsgd::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
