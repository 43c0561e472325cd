#include "collectives/blocks/region_order.hpp"

#include <cstring>

namespace sparsgd::collectives {

RegionOrder region_order_for(std::size_t width, std::size_t touched) {
  return width <= kRegionScanMaxWidthPerEntry * touched ? RegionOrder::scan_flags : RegionOrder::sort_touched;
}

namespace {

// Every offset with a flag, ascending, as begin + offset: exactly touched.size() of them.
void compact_flags(std::span<const std::uint8_t> seen, std::span<std::uint32_t> touched, std::uint32_t begin) {
  const std::size_t width = seen.size();
  const std::size_t m = touched.size();
  std::uint32_t* out = touched.data();
  std::size_t e = 0;
  std::size_t at = 0;
  // Word by word, skipping empty words; inside a word without a branch per flag, which a fill
  // between 1/64 and 1/2 would mispredict about every other byte: each byte's index is written and
  // kept only if its flag is set. That writes up to 8 slots past the last kept one, so this runs
  // while 8 more slots remain.
  for (; at + 8 <= width && e + 8 <= m; at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, seen.data() + at, sizeof word);
    if (word == 0) continue;
    for (std::size_t b = 0; b < 8; ++b) {
      out[e] = begin + static_cast<std::uint32_t>(at + b);
      e += seen[at + b] != 0 ? 1 : 0;
    }
  }
  for (; at < width && e < m; ++at) {
    if (seen[at] != 0) out[e++] = begin + static_cast<std::uint32_t>(at);
  }
}

}  // namespace

void order_touched(RegionOrder order, std::span<const std::uint8_t> seen, std::span<std::uint32_t> touched,
                   std::uint32_t begin, const hwy::Sorter& sorter) {
  if (touched.empty()) return;
  if (order == RegionOrder::scan_flags) {
    compact_flags(seen, touched, begin);
  } else {
    sorter(touched.data(), touched.size(), hwy::SortAscending());  // plain integer keys: std::sort's order
  }
}

void take_ordered(std::span<const std::uint32_t> ordered, std::uint32_t begin, std::span<float> sums,
                  std::span<std::uint8_t> seen, std::span<std::uint32_t> indices, std::span<float> values) {
  for (std::size_t e = 0; e < ordered.size(); ++e) {
    const std::size_t at = ordered[e] - begin;
    indices[e] = ordered[e];
    values[e] = sums[at];
    sums[at] = 0.0f;
    seen[at] = 0;
  }
}

}  // namespace sparsgd::collectives
