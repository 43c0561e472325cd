// Vectorized magnitude passes with Highway's runtime dispatch: compiled for every x86-64 target
// Highway knows (SSE2 up to AVX-512) and the best one is picked on first call, so the default build
// runs on any x86-64 without -march flags.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "select/magnitude_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/compress_store-inl.hpp"

#include <algorithm>
#include <cmath>
#include <vector>
#include <string>

#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"

HWY_BEFORE_NAMESPACE();
namespace sparsgd::select::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using simd::HWY_NAMESPACE::CompressToWhole;

// Keys fit in 31 bits, so signed 32-bit lanes give native compares and max on every target.
using DI = hn::ScalableTag<int32_t>;
using DF = hn::ScalableTag<float>;

uint32_t MaxKeyImpl(const float* HWY_RESTRICT x, size_t n) {
  const DI di;
  const DF df;
  const size_t lanes = hn::Lanes(di);
  const auto sign_off = hn::Set(di, 0x7FFFFFFF);
  auto m0 = hn::Zero(di), m1 = hn::Zero(di), m2 = hn::Zero(di), m3 = hn::Zero(di);
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    m0 = hn::Max(m0, hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), sign_off));
    m1 = hn::Max(m1, hn::And(hn::BitCast(di, hn::LoadU(df, x + i + lanes)), sign_off));
    m2 = hn::Max(m2, hn::And(hn::BitCast(di, hn::LoadU(df, x + i + 2 * lanes)), sign_off));
    m3 = hn::Max(m3, hn::And(hn::BitCast(di, hn::LoadU(df, x + i + 3 * lanes)), sign_off));
  }
  for (; i + lanes <= n; i += lanes) {
    m0 = hn::Max(m0, hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), sign_off));
  }
  const auto all = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  uint32_t best = static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, all)));
  for (; i < n; ++i) {
    const uint32_t key = magnitude_key(x[i]);
    best = key > best ? key : best;
  }
  return best;
}

FilterCounts FilterGreaterImpl(const float* HWY_RESTRICT x, size_t n, uint32_t pivot,
                               uint32_t* HWY_RESTRICT idx_out, float* HWY_RESTRICT val_out,
                               size_t capacity) {
  const DI di;
  const DF df;
  const size_t lanes = hn::Lanes(di);
  const auto sign_off = hn::Set(di, 0x7FFFFFFF);
  const auto vpivot = hn::Set(di, static_cast<int32_t>(pivot));
  const auto step = hn::Set(di, static_cast<int32_t>(lanes));
  auto index = hn::Iota(di, 0);
  auto vmax = hn::Zero(di);
  auto equal_lanes = hn::Zero(di);
  FilterCounts counts;
  bool full = false;
  size_t i = 0;
  // Two vectors a step: the hit test is one branch for both, and hits are rare for a pivot near
  // the top-k threshold, so the loop stays a compare-and-count stream bound by memory.
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto b0 = hn::BitCast(di, hn::LoadU(df, x + i));
    const auto b1 = hn::BitCast(di, hn::LoadU(df, x + i + lanes));
    const auto k0 = hn::And(b0, sign_off);
    const auto k1 = hn::And(b1, sign_off);
    vmax = hn::Max(vmax, hn::Max(k0, k1));
    equal_lanes = hn::Sub(equal_lanes, hn::VecFromMask(di, hn::Eq(k0, vpivot)));
    equal_lanes = hn::Sub(equal_lanes, hn::VecFromMask(di, hn::Eq(k1, vpivot)));
    const auto g0 = hn::Gt(k0, vpivot);
    const auto g1 = hn::Gt(k1, vpivot);
    if (HWY_UNLIKELY(!hn::AllFalse(di, hn::Or(g0, g1)))) {
      const size_t h0 = hn::CountTrue(di, g0);
      const size_t h1 = hn::CountTrue(di, g1);
      if (!full && counts.stored + h0 + h1 <= capacity) {
        CompressToWhole(hn::BitCast(df, b0), hn::RebindMask(df, g0), df, val_out + counts.stored);
        CompressToWhole(index, g0, di, reinterpret_cast<int32_t*>(idx_out) + counts.stored);
        counts.stored += h0;
        const auto index1 = hn::Add(index, step);
        CompressToWhole(hn::BitCast(df, b1), hn::RebindMask(df, g1), df, val_out + counts.stored);
        CompressToWhole(index1, g1, di, reinterpret_cast<int32_t*>(idx_out) + counts.stored);
        counts.stored += h1;
      } else {
        full = true;
      }
      counts.greater += h0 + h1;
    }
    index = hn::Add(index, hn::Add(step, step));
  }
  counts.max_key = static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, vmax)));
  // equal_lanes counts at most n / lanes per lane, which fits in int32 because n < 2^32.
  {
    HWY_ALIGN int32_t per_lane[hn::MaxLanes(di)];
    hn::Store(equal_lanes, di, per_lane);
    for (size_t l = 0; l < lanes; ++l) counts.equal += static_cast<uint32_t>(per_lane[l]);
  }
  for (; i < n; ++i) {
    const uint32_t key = magnitude_key(x[i]);
    counts.max_key = key > counts.max_key ? key : counts.max_key;
    if (key == pivot) {
      ++counts.equal;
    } else if (key > pivot) {
      if (!full && counts.stored < capacity) {
        idx_out[counts.stored] = static_cast<uint32_t>(i);
        val_out[counts.stored] = x[i];
        ++counts.stored;
      } else {
        full = true;
      }
      ++counts.greater;
    }
  }
  return counts;
}


// Keys above `hi` are counted; keys in [lo, hi] are stored (compressed) to band_out. The keys are
// read from an array, or made from values as magnitude key + offset.
template <bool kFromValues>
size_t BandLoop(const void* HWY_RESTRICT source, size_t n, uint32_t offset, uint32_t lo, uint32_t hi,
                uint32_t* HWY_RESTRICT band_out, size_t* above_out) {
  const DI di;
  const size_t lanes = hn::Lanes(di);
  const auto* ints = static_cast<const int32_t*>(source);
  const auto sign_off = hn::Set(di, 0x7FFFFFFF);
  const auto voffset = hn::Set(di, static_cast<int32_t>(offset));
  auto load_key = [&](size_t i) {
    if constexpr (kFromValues) return hn::Add(hn::And(hn::LoadU(di, ints + i), sign_off), voffset);
    return hn::LoadU(di, ints + i);
  };
  auto scalar_key = [&](size_t i) {
    const auto bits = static_cast<uint32_t>(ints[i]);
    return kFromValues ? (bits & 0x7FFFFFFFu) + offset : bits;
  };
  const auto vlo = hn::Set(di, static_cast<int32_t>(lo));
  const auto vhi = hn::Set(di, static_cast<int32_t>(hi));
  auto above_lanes = hn::Zero(di);
  size_t stored = 0;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto key = load_key(i);
    const auto over = hn::Gt(key, vhi);
    above_lanes = hn::Sub(above_lanes, hn::VecFromMask(di, over));
    const auto in_band = hn::AndNot(over, hn::Not(hn::Lt(key, vlo)));
    CompressToWhole(key, in_band, di, reinterpret_cast<int32_t*>(band_out) + stored);
    stored += hn::CountTrue(di, in_band);
  }
  size_t above = 0;
  {
    HWY_ALIGN int32_t per_lane[hn::MaxLanes(di)];
    hn::Store(above_lanes, di, per_lane);
    for (size_t l = 0; l < lanes; ++l) above += static_cast<uint32_t>(per_lane[l]);
  }
  for (; i < n; ++i) {
    const uint32_t key = scalar_key(i);
    above += key > hi;
    band_out[stored] = key;
    stored += key >= lo && key <= hi;
  }
  *above_out = above;
  return stored;
}

size_t KeyBandImpl(const uint32_t* HWY_RESTRICT keys, size_t n, uint32_t lo, uint32_t hi,
                   uint32_t* HWY_RESTRICT band_out, size_t* above_out) {
  return BandLoop<false>(keys, n, 0, lo, hi, band_out, above_out);
}

size_t ValueBandImpl(const float* HWY_RESTRICT values, size_t n, uint32_t offset, uint32_t lo, uint32_t hi,
                     uint32_t* HWY_RESTRICT band_out, size_t* above_out) {
  return BandLoop<true>(values, n, offset, lo, hi, band_out, above_out);
}

// Sums of (x - shift) and (x - shift)^2, every term and sum in double lanes: so precise that the
// Gaussian estimate's pivot is the same float whatever the summation order, as where a GPU sums
// the same values (torch/device_selection.cpp). A shift near the mean keeps the variance from
// cancelling when the mean is large against the spread.
void SumsImpl(const float* HWY_RESTRICT x, size_t n, float shift, double* sum_out, double* sum_sq_out) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df_half;
  const auto vshift = hn::Set(dd, static_cast<double>(shift));
  const size_t lanes = hn::Lanes(dd);
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd), q0 = hn::Zero(dd), q1 = hn::Zero(dd);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto v0 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df_half, x + i)), vshift);
    const auto v1 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df_half, x + i + lanes)), vshift);
    s0 = hn::Add(s0, v0);
    s1 = hn::Add(s1, v1);
    q0 = hn::MulAdd(v0, v0, q0);
    q1 = hn::MulAdd(v1, v1, q1);
  }
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  double sum_sq = hn::GetLane(hn::SumOfLanes(dd, hn::Add(q0, q1)));
  for (; i < n; ++i) {
    const double v = static_cast<double>(x[i]) - shift;
    sum += v;
    sum_sq += v * v;
  }
  *sum_out = sum;
  *sum_sq_out = sum_sq;
}

}  // namespace sparsgd::select::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sparsgd::select {

HWY_EXPORT(MaxKeyImpl);
HWY_EXPORT(FilterGreaterImpl);
HWY_EXPORT(SumsImpl);
HWY_EXPORT(KeyBandImpl);
HWY_EXPORT(ValueBandImpl);

std::uint32_t max_magnitude_key(std::span<const float> x) {
  return HWY_DYNAMIC_DISPATCH(MaxKeyImpl)(x.data(), x.size());
}

std::size_t filter_padding() {
  // The widest vector any target may store (AVX-512: 16 floats), whichever target runs.
  return 64;
}

FilterCounts filter_greater(std::span<const float> x, std::uint32_t pivot, std::uint32_t* idx_out,
                            float* val_out, std::size_t capacity) {
  return HWY_DYNAMIC_DISPATCH(FilterGreaterImpl)(x.data(), x.size(), pivot, idx_out, val_out,
                                                 capacity);
}

KeyBand key_band(std::span<const std::uint32_t> keys, std::uint32_t lo, std::uint32_t hi, std::uint32_t* band_out) {
  KeyBand band;
  band.in_band = HWY_DYNAMIC_DISPATCH(KeyBandImpl)(keys.data(), keys.size(), lo, hi, band_out, &band.above);
  return band;
}

KeyBand key_band_of_values(std::span<const float> values, std::uint32_t key_offset, std::uint32_t lo, std::uint32_t hi,
                           std::uint32_t* band_out) {
  KeyBand band;
  band.in_band =
      HWY_DYNAMIC_DISPATCH(ValueBandImpl)(values.data(), values.size(), key_offset, lo, hi, band_out, &band.above);
  return band;
}

std::size_t moments_shift_stride(std::size_t n) { return std::max<std::size_t>(1, n / 64); }

float moments_shift(std::span<const float> sample) {
  double sample_sum = 0.0;
  for (const float v : sample) sample_sum += v;
  const auto shift = static_cast<float>(sample_sum / static_cast<double>(sample.size()));
  return std::isfinite(shift) ? shift : 0.0f;
}

Moments moments_from_sums(float shift, double sum, double sum_sq, std::size_t n) {
  Moments result;
  if (!std::isfinite(sum) || !std::isfinite(sum_sq)) {
    result.finite = false;
    return result;
  }
  const double count = static_cast<double>(n);
  const double shifted_mean = sum / count;
  result.mean = shift + shifted_mean;
  const double variance = sum_sq / count - shifted_mean * shifted_mean;
  result.stddev = variance > 0.0 ? std::sqrt(variance) : 0.0;
  return result;
}

Moments moments(std::span<const float> x) {
  if (x.empty()) return {};
  // Shift by the mean of a strided sample of up to 128 entries, so that the sums see the spread.
  const std::size_t stride = moments_shift_stride(x.size());
  std::vector<float> sample;
  for (std::size_t i = 0; i < x.size(); i += stride) sample.push_back(x[i]);
  const float shift = moments_shift(sample);
  double sum = 0.0, sum_sq = 0.0;
  HWY_DYNAMIC_DISPATCH(SumsImpl)(x.data(), x.size(), shift, &sum, &sum_sq);
  return moments_from_sums(shift, sum, sum_sq, x.size());
}

void check_finite(std::span<const float> x, const char* what) {
  if (max_magnitude_key(x) < kNonFiniteKey) return;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      throw InvalidData(std::string(what) + " holds a non-finite value (" + std::to_string(x[i]) +
                        ") at index " + std::to_string(i));
    }
  }
}

}  // namespace sparsgd::select
#endif  // HWY_ONCE
