#pragma once
// Magnitude keys and the vectorized passes that every selection kernel is built from.
//
// A magnitude key is a float's bit pattern with the sign bit cleared. For finite values (denormals
// and both zeros included) the unsigned order of keys equals the order of |x|, and -0 and +0 share
// key 0, so kernels compare integers and never call fabs. Keys >= kNonFiniteKey are Inf or NaN.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace sparsgd::select {

inline constexpr std::uint32_t kNonFiniteKey = 0x7F800000u;

inline std::uint32_t magnitude_key(float x) { return std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu; }
inline float key_to_magnitude(std::uint32_t key) { return std::bit_cast<float>(key); }

// Largest magnitude key in x (0 for an empty span). One vectorized read pass: the memory-bound
// floor that the benchmark compares selection against.
std::uint32_t max_magnitude_key(std::span<const float> x);

struct FilterCounts {
  std::size_t greater = 0;  // entries with key > pivot
  std::size_t equal = 0;    // entries with key == pivot
  std::size_t stored = 0;   // entries written (key > pivot, in index order, while they fit)
  std::uint32_t max_key = 0;
  bool overflow() const { return stored < greater; }
};

// Extra slots past `capacity` that filter_greater may scribble on (it stores whole vectors).
std::size_t filter_padding();

// One pass over x: counts keys greater than and equal to `pivot`, tracks the largest key, and
// stores (index, value) of each entry with key > pivot, in ascending index order, as long as
// `capacity` allows. idx_out and val_out must have room for capacity + filter_padding() entries.
FilterCounts filter_greater(std::span<const float> x, std::uint32_t pivot, std::uint32_t* idx_out,
                            float* val_out, std::size_t capacity);

struct KeyBand {
  std::size_t above = 0;    // keys > hi
  std::size_t in_band = 0;  // keys in [lo, hi], stored
};
// One pass over keys (each < 2^31): counts those above hi and stores those in [lo, hi], in order,
// to band_out, which needs keys.size() + filter_padding() slots.
KeyBand key_band(std::span<const std::uint32_t> keys, std::uint32_t lo, std::uint32_t hi, std::uint32_t* band_out);
// The same over the keys magnitude_key(v) + key_offset of finite values (the sum must stay below
// 2^31), made on the fly.
KeyBand key_band_of_values(std::span<const float> values, std::uint32_t key_offset, std::uint32_t lo, std::uint32_t hi,
                           std::uint32_t* band_out);

// Throws InvalidData naming the first entry of x that is NaN or Inf, if any; `what` names the
// array in the message ("gradient", ...).
void check_finite(std::span<const float> x, const char* what);

}  // namespace sparsgd::select

namespace sparsgd::select {

// Mean and standard deviation of x in one vectorized pass, summed in double (x - shift for a
// shift near the mean). `finite` is false when x holds NaN or Inf (the moments are then meaningless).
struct Moments {
  double mean = 0.0;
  double stddev = 0.0;
  bool finite = true;
};
Moments moments(std::span<const float> x);
// Its parts, for the same statistics made where x lives elsewhere (a GPU): the shift is the mean of
// x[0], x[stride], x[2 stride], ... summed in index order; then the sums of (x - shift) and its
// square over all of x.
std::size_t moments_shift_stride(std::size_t n);
float moments_shift(std::span<const float> sample);
Moments moments_from_sums(float shift, double sum, double sum_sq, std::size_t n);

}  // namespace sparsgd::select
