#include "sparsgd/select/topk.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::select {
namespace {

// Below this length, or above this density, the filter cannot beat a plain nth_element.
constexpr std::size_t kSmallLength = std::size_t{1} << 15;
// Below this many keys the radix select's passes cost less than a sample and a band pass.
constexpr std::size_t kSampledKeysMinimum = 8192;
constexpr std::size_t kSmallDensityInverse = 8;
// The sample is read in runs of one cache line so that it costs one miss per 16 keys.
constexpr std::size_t kSampleRun = 16;

// Emits, in index order, every entry with key > threshold and the first `equal_needed` entries
// with key == threshold. The caller guarantees exactly k are emitted.
std::size_t emit_by_threshold(std::span<const float> x, std::uint32_t threshold,
                              std::size_t equal_needed, std::uint32_t* out_indices,
                              float* out_values) {
  std::size_t written = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t key = magnitude_key(x[i]);
    if (key > threshold || (key == threshold && equal_needed > 0)) {
      if (key == threshold) --equal_needed;
      out_indices[written] = static_cast<std::uint32_t>(i);
      out_values[written] = x[i];
      ++written;
    }
  }
  return written;
}

void throw_if_non_finite(std::span<const float> x, std::uint32_t max_key) {
  if (max_key >= kNonFiniteKey) check_finite(x, "input to top-k");
}

// Emits in index order every key > threshold and the first `equal_needed` keys == threshold,
// stopping at k. Branch-free in the loop body: at high density a branch on the key would
// mispredict about half the time.
void emit_from_keys(std::span<const float> x, const std::uint32_t* keys, std::uint32_t threshold,
                    std::size_t equal_needed, std::size_t k, std::uint32_t* out_indices, float* out_values) {
  std::size_t written = 0;
  std::size_t equal_left = equal_needed;
  for (std::size_t i = 0; i < x.size() && written < k; ++i) {
    const std::uint32_t key = keys[i];
    const std::size_t is_equal = key == threshold;
    const std::size_t take = (key > threshold) | (is_equal & (equal_left > 0));
    out_indices[written] = static_cast<std::uint32_t>(i);
    out_values[written] = x[i];
    written += take;
    equal_left -= is_equal & take;
  }
}

// Dense or short inputs: keys, a histogram select over them, then a branch-free emission.
TopkPath select_small(std::span<const float> x, std::size_t k, std::uint32_t* out_indices,
                      float* out_values, TopkWorkspace& ws) {
  const std::size_t n = x.size();
  ws.keys.resize(n);
  std::uint32_t max_key = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t key = magnitude_key(x[i]);
    ws.keys[i] = key;
    max_key = std::max(max_key, key);
  }
  throw_if_non_finite(x, max_key);
  const KthKey kth = kth_largest_of_keys(ws.keys, k, ws.tie_indices);
  emit_from_keys(x, ws.keys.data(), kth.key, k - kth.greater, k, out_indices, out_values);
  return TopkPath::small;
}

TopkPath select_radix(std::span<const float> x, std::size_t k, std::uint32_t* out_indices,
                      float* out_values) {
  throw_if_non_finite(x, max_magnitude_key(x));
  const KthKey kth = kth_largest_key_radix(x, k);
  emit_by_threshold(x, kth.key, k - kth.greater, out_indices, out_values);
  return TopkPath::radix;
}

// The sampled pivot: a key that, judging by a strided sample, a few more than k entries exceed.
struct Pivot {
  std::uint32_t key;
  std::size_t capacity;
};

Pivot choose_pivot(std::span<const float> x, std::size_t k, TopkWorkspace& ws) {
  const std::size_t n = x.size();
  const double density = static_cast<double>(k) / static_cast<double>(n);
  // Enough sample that about 32 sampled keys lie above the threshold, within [8 Ki, 64 Ki].
  std::size_t sample = static_cast<std::size_t>(32.0 / density);
  sample = std::clamp<std::size_t>(sample, std::size_t{8} << 10, std::size_t{64} << 10);
  sample = std::min(sample, n / 8);
  const std::size_t runs = std::max<std::size_t>(1, sample / kSampleRun);
  const std::size_t stride = n / runs;
  ws.keys.resize(runs * kSampleRun);
  std::size_t s = 0;
  for (std::size_t r = 0; r < runs; ++r) {
    const std::size_t start = r * stride + (stride - kSampleRun) / 2;
    for (std::size_t j = 0; j < kSampleRun; ++j) ws.keys[s++] = magnitude_key(x[start + j]);
  }
  const double m = static_cast<double>(s);
  const double expected_rank = density * m;
  // Four standard deviations of the binomial count plus a constant: the pivot lands below the
  // true threshold except with tiny probability on data without structure.
  auto rank = static_cast<std::size_t>(std::ceil(expected_rank + 4.0 * std::sqrt(expected_rank) + 8.0));
  rank = std::min(rank, s);
  auto nth = ws.keys.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(ws.keys.begin(), nth, ws.keys.end(), std::greater<>());
  const double expected_candidates = static_cast<double>(rank) * static_cast<double>(n) / m;
  auto capacity = static_cast<std::size_t>(2.0 * expected_candidates) + k + 1024;
  capacity = std::min(capacity, n);
  return {*nth, capacity};
}

// Returns false if the sample misjudged and the caller must fall back.
bool select_sampled(std::span<const float> x, std::size_t k, std::uint32_t* out_indices,
                    float* out_values, TopkWorkspace& ws, TopkPath& path) {
  const Pivot pivot = choose_pivot(x, k, ws);
  const std::size_t padded = pivot.capacity + filter_padding();
  if (ws.candidate_indices.size() < padded) {
    ws.candidate_indices.resize(padded);
    ws.candidate_values.resize(padded);
  }
  const FilterCounts counts = filter_greater(x, pivot.key, ws.candidate_indices.data(),
                                             ws.candidate_values.data(), pivot.capacity);
  throw_if_non_finite(x, counts.max_key);
  if (counts.overflow()) return false;
  const std::uint32_t* cand_idx = ws.candidate_indices.data();
  const float* cand_val = ws.candidate_values.data();
  const std::size_t found = counts.stored;

  if (found >= k) {
    // The k-th largest key lies above the pivot, so every entry that can be selected is a candidate.
    ws.keys.resize(found);
    for (std::size_t i = 0; i < found; ++i) ws.keys[i] = magnitude_key(cand_val[i]);
    const KthKey kth = kth_largest_of_keys(ws.keys, k, ws.tie_indices);
    std::size_t equal_needed = k - kth.greater;
    std::size_t written = 0;
    for (std::size_t i = 0; i < found; ++i) {
      const std::uint32_t key = magnitude_key(cand_val[i]);
      if (key > kth.key || (key == kth.key && equal_needed > 0)) {
        if (key == kth.key) --equal_needed;
        out_indices[written] = cand_idx[i];
        out_values[written] = cand_val[i];
        ++written;
      }
    }
    path = TopkPath::sampled;
    return true;
  }
  if (found + counts.equal < k) return false;  // pivot above the threshold

  // The threshold is the pivot itself: take all candidates and the first ties, merged by index.
  std::size_t ties_needed = k - found;
  ws.tie_indices.clear();
  const std::uint32_t tie_key = pivot.key;
  for (std::size_t i = 0; i < x.size() && ties_needed > 0; ++i) {
    if (magnitude_key(x[i]) == tie_key) {
      ws.tie_indices.push_back(static_cast<std::uint32_t>(i));
      --ties_needed;
    }
  }
  std::size_t a = 0, b = 0, written = 0;
  const std::size_t ties = ws.tie_indices.size();
  while (a < found || b < ties) {
    if (b == ties || (a < found && cand_idx[a] < ws.tie_indices[b])) {
      out_indices[written] = cand_idx[a];
      out_values[written] = cand_val[a];
      ++a;
    } else {
      out_indices[written] = ws.tie_indices[b];
      out_values[written] = x[ws.tie_indices[b]];
      ++b;
    }
    ++written;
  }
  path = TopkPath::sampled_tie;
  return true;
}

}  // namespace

const char* to_string(TopkPath path) {
  switch (path) {
    case TopkPath::empty: return "empty";
    case TopkPath::all: return "all";
    case TopkPath::small: return "small";
    case TopkPath::sampled: return "sampled";
    case TopkPath::sampled_tie: return "sampled-tie";
    case TopkPath::radix: return "radix";
  }
  return "?";
}

KthKey kth_largest_key_radix(std::span<const float> x, std::size_t k) {
  SPARSGD_ENFORCE(k >= 1 && k <= x.size(), "radix select needs 1 <= k <= n");
  // Keys have 31 significant bits: levels of 10, 11 and 10 bits, most significant first.
  struct Level {
    int shift;
    std::uint32_t bins;
  };
  constexpr Level levels[] = {{21, 1024}, {10, 2048}, {0, 1024}};
  std::vector<std::size_t> histogram;
  std::uint32_t prefix = 0;
  std::uint32_t prefix_mask = 0;
  std::size_t remaining = k;  // rank of the answer among keys that share the prefix
  std::size_t equal = 0;
  for (const Level& level : levels) {
    histogram.assign(level.bins, 0);
    const std::uint32_t digit_mask = level.bins - 1;
    for (const float v : x) {
      const std::uint32_t key = magnitude_key(v);
      if ((key & prefix_mask) == prefix) ++histogram[(key >> level.shift) & digit_mask];
    }
    std::uint32_t bin = level.bins;
    while (bin > 0) {
      --bin;
      if (histogram[bin] >= remaining) break;
      remaining -= histogram[bin];
    }
    prefix |= bin << level.shift;
    prefix_mask |= digit_mask << level.shift;
    equal = histogram[bin];
  }
  return {prefix, k - remaining, equal};
}

namespace {

KthKey kth_largest_of_keys_radix(std::span<const std::uint32_t> keys, std::size_t k, std::vector<std::uint32_t>& scratch) {
  // Radix select whose bins span only the keys' actual range: the keys of a top-k set crowd into a
  // few exponents, so fixed bit fields (the top 11 bits, say) would put most of them in one bin.
  // Each level narrows the range by 2^11 and keeps only the threshold bin's keys, so at most three
  // levels run, the later ones over a small remainder.
  constexpr std::uint32_t kBins = 2048;
  std::uint32_t histogram[kBins];
  const std::uint32_t* data = keys.data();
  std::size_t size = keys.size();
  std::size_t greater = 0;  // keys above the current range
  std::size_t rank = k;     // rank of the answer from the top within the current range
  if (scratch.size() < size) scratch.resize(size);
  while (true) {
    std::uint32_t lo = data[0], hi = data[0];
    for (std::size_t i = 1; i < size; ++i) {
      lo = std::min(lo, data[i]);
      hi = std::max(hi, data[i]);
    }
    if (lo == hi) return {lo, greater, size};
    const int shift = std::bit_width((hi - lo) / kBins);
    std::fill(histogram, histogram + kBins, 0u);
    for (std::size_t i = 0; i < size; ++i) ++histogram[(data[i] - lo) >> shift];
    std::uint32_t bin = ((hi - lo) >> shift) + 1;
    while (bin > 0) {
      --bin;
      if (histogram[bin] >= rank) break;
      rank -= histogram[bin];
      greater += histogram[bin];
    }
    if (shift == 0) return {lo + bin, greater, histogram[bin]};
    // Keep the bin's keys; compacting within scratch is safe because writes trail reads.
    std::uint32_t* kept = scratch.data();
    std::size_t count = 0;
    for (std::size_t i = 0; i < size; ++i) {
      kept[count] = data[i];
      count += ((data[i] - lo) >> shift) == bin;
    }
    data = kept;
    size = count;
  }
}

// Where the keys come from: an array, or two arrays of values (key = magnitude key + offset).
struct KeyArray {
  std::span<const std::uint32_t> keys;
  std::size_t size() const { return keys.size(); }
  std::uint32_t key(std::size_t i) const { return keys[i]; }
  KeyBand band(std::uint32_t lo, std::uint32_t hi, std::uint32_t* out) const { return key_band(keys, lo, hi, out); }
};

struct ValueArrays {
  std::span<const float> a, b;
  std::uint32_t offset;
  std::size_t size() const { return a.size() + b.size(); }
  std::uint32_t key(std::size_t i) const {
    return magnitude_key(i < a.size() ? a[i] : b[i - a.size()]) + offset;
  }
  KeyBand band(std::uint32_t lo, std::uint32_t hi, std::uint32_t* out) const {
    const KeyBand from_a = key_band_of_values(a, offset, lo, hi, out);
    const KeyBand from_b = key_band_of_values(b, offset, lo, hi, out + from_a.in_band);
    return {from_a.above + from_b.above, from_a.in_band + from_b.in_band};
  }
};

// A strided sample brackets the k-th largest key; one vectorized pass counts the keys above the
// bracket and keeps those inside it, and the exact answer is selected among those few. Empty when
// the sample misjudged (the answer lies outside the bracket): the caller falls back to radix.
// `floor`: keys below it are never taken as the answer here (a caller that knows they are rarely
// it, and plentiful, keeps them out of the band; if the answer is one, the bracket misses it).
template <typename Source>
std::optional<KthKey> kth_largest_sampled(const Source& source, std::size_t k, std::vector<std::uint32_t>& scratch,
                                          std::uint32_t floor = 0) {
  constexpr std::size_t kSample = 1024;
  const std::size_t n = source.size();
  const std::size_t stride = n / kSample;
  std::uint32_t sample[kSample];
  for (std::size_t i = 0; i < kSample; ++i) sample[i] = source.key(i * stride + stride / 2);
  // The sample's rank of the answer (from the top) is about k / stride, give or take
  // sqrt(kSample q (1 - q)); a margin of three of those leaves the bracket wrong rarely.
  const double q = static_cast<double>(k) / static_cast<double>(n);
  const auto expected = static_cast<std::ptrdiff_t>(q * kSample);
  const auto margin = static_cast<std::ptrdiff_t>(3.0 * std::sqrt(kSample * q * (1.0 - q))) + 2;
  const std::ptrdiff_t top_rank = expected - margin;          // its key bounds the answer from above
  const std::ptrdiff_t bottom_rank = expected + margin;       // and this one from below
  const auto descending = std::greater<std::uint32_t>();
  std::uint32_t lo = 0;
  std::uint32_t hi = std::numeric_limits<std::int32_t>::max();
  std::uint32_t* const end = sample + kSample;
  if (bottom_rank < static_cast<std::ptrdiff_t>(kSample)) {
    std::nth_element(sample, sample + bottom_rank, end, descending);
    lo = sample[bottom_rank];
  }
  if (top_rank >= 0) {
    std::nth_element(sample, sample + top_rank, sample + std::min<std::ptrdiff_t>(bottom_rank, kSample), descending);
    hi = sample[top_rank];
  }
  lo = std::max(lo, floor);
  if (hi < lo) return std::nullopt;
  if (scratch.size() < n + filter_padding()) scratch.resize(n + filter_padding());
  const KeyBand band = source.band(lo, hi, scratch.data());
  if (band.above >= k || band.above + band.in_band < k) return std::nullopt;
  // The band's keys span a narrow range, which the radix select's range-fitted bins split in about
  // one pass (it compacts within scratch, behind its reads).
  KthKey kth = kth_largest_of_keys_radix(std::span(scratch.data(), band.in_band), k - band.above, scratch);
  kth.greater += band.above;
  return kth;
}

}  // namespace

KthKey kth_largest_of_keys(std::span<const std::uint32_t> keys, std::size_t k, std::vector<std::uint32_t>& scratch) {
  SPARSGD_ENFORCE(k >= 1 && k <= keys.size(), "k-th largest needs 1 <= k <= n");
  if (keys.size() >= kSampledKeysMinimum) {
    if (const auto kth = kth_largest_sampled(KeyArray{keys}, k, scratch)) return *kth;
  }
  return kth_largest_of_keys_radix(keys, k, scratch);
}

KthKey kth_largest_of_values(std::span<const float> a, std::span<const float> b, std::uint32_t key_offset,
                             std::size_t k, std::vector<std::uint32_t>& scratch) {
  const ValueArrays source{a, b, key_offset};
  const std::size_t n = source.size();
  SPARSGD_ENFORCE(k >= 1 && k <= n, "k-th largest needs 1 <= k <= n");
  if (n >= kSampledKeysMinimum) {
    // Zeros (key == key_offset) are rarely the k-th largest but may be many (the merge zeroes the
    // copies of shared indices): the band starts above them.
    if (const auto kth = kth_largest_sampled(source, k, scratch, key_offset + 1)) return *kth;
  }
  // Rare (small inputs, a misleading sample, a zero answer): the keys once, then the radix select over them.
  if (scratch.size() < n) scratch.resize(n);
  for (std::size_t i = 0; i < n; ++i) scratch[i] = source.key(i);
  return kth_largest_of_keys_radix(std::span(scratch.data(), n), k, scratch);
}

TopkPath topk(std::span<const float> x, std::size_t k, std::span<std::uint32_t> out_indices,
              std::span<float> out_values, TopkWorkspace& workspace, const TopkOptions& options) {
  const std::size_t n = x.size();
  validate_k(n, k);
  SPARSGD_ENFORCE_GE(out_indices.size(), k, "top-k index output is too short");
  SPARSGD_ENFORCE_GE(out_values.size(), k, "top-k value output is too short");
  if (n == 0) return TopkPath::empty;
  if (k == n) {
    throw_if_non_finite(x, max_magnitude_key(x));
    for (std::size_t i = 0; i < n; ++i) {
      out_indices[i] = static_cast<std::uint32_t>(i);
      out_values[i] = x[i];
    }
    return TopkPath::all;
  }
  if (options.force_radix) return select_radix(x, k, out_indices.data(), out_values.data());
  if (n < kSmallLength || k * kSmallDensityInverse > n) {
    return select_small(x, k, out_indices.data(), out_values.data(), workspace);
  }
  TopkPath path = TopkPath::sampled;
  if (select_sampled(x, k, out_indices.data(), out_values.data(), workspace, path)) return path;
  return select_radix(x, k, out_indices.data(), out_values.data());
}

TopkPath topk(std::span<const float> x, std::size_t k, SparseVector& out, TopkWorkspace& workspace,
              const TopkOptions& options) {
  validate_k(x.size(), k);
  out.dim = x.size();
  out.resize(k);
  return topk(x, k, out.indices, out.values, workspace, options);
}

}  // namespace sparsgd::select
