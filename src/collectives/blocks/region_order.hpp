#pragma once
// Ok-Topk's reduced region in index order. The split leaves a region's sums in an array as wide as
// the region, with a flag at every offset some rank sent, and the list of those indices in the
// order they were first seen. The list comes into index order either by one pass over the flags
// (its cost grows with the width) or by sorting it (grows with m log m, m touched): which is cheaper
// depends on how densely the union fills the region, and error feedback moves that from exchange
// to exchange. Separate from oktopk.cpp so that bench/collectives_benchmarks.cpp times exactly
// these two paths and the rule between them, and the tests check both against std::sort.

#include <cstddef>
#include <cstdint>
#include <span>

#include <hwy/contrib/sort/vqsort.h>

namespace sparsgd::collectives {

enum class RegionOrder { scan_flags, sort_touched };

// The pass over the flags where the region is at most this many times as wide as the entries
// touched (the union fills at least an eighth of it), the sort otherwise. bench/
// collectives_benchmarks.cpp's BM_RegionOrder times both over region widths 3,906 to 6.25M and
// fills 1/2 to 1/1024: the two meet at fills of 1/6 to 1/10 at every width (findings.md).
inline constexpr std::size_t kRegionScanMaxWidthPerEntry = 8;

RegionOrder region_order_for(std::size_t width, std::size_t touched);

// Puts `touched` (absolute indices, distinct, each in [begin, begin + seen.size())) in ascending
// order. `seen` has a nonzero flag at exactly the offsets index - begin of `touched`; neither path
// changes a flag. The scan rewrites `touched` from the flags; the sort sorts it (Highway's VQSort).
void order_touched(RegionOrder order, std::span<const std::uint8_t> seen, std::span<std::uint32_t> touched,
                   std::uint32_t begin, const hwy::Sorter& sorter);

// The region's entries in the order of `ordered` (order_touched's result): entry e is index ordered[e]
// and its sum, whose sum and flag are cleared for the next call. `indices` and `values` hold
// ordered.size() entries.
void take_ordered(std::span<const std::uint32_t> ordered, std::uint32_t begin, std::span<float> sums,
                  std::span<std::uint8_t> seen, std::span<std::uint32_t> indices, std::span<float> values);

}  // namespace sparsgd::collectives
