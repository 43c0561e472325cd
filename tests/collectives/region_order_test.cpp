// Ok-Topk's reduced region in index order (region_order.hpp), both paths against std::sort of the
// same indices: widths 0 to 70 (every remainder of the flags' 8-byte words, and regions narrower
// than a word) and up to 100,000, fills from nothing to every offset, runs of touched offsets at
// the region's two ends, flags other than 1, regions that start at 0 and near 2^32. And the rule:
// it switches exactly at the documented fill.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/blocks/region_order.hpp"
#include "sparsgd/core/random.hpp"

namespace sparsgd::collectives {
namespace {

struct Region {
  std::uint32_t begin = 0;
  std::vector<std::uint8_t> seen;
  std::vector<std::uint32_t> touched;  // in first-seen (random) order
};

// `chosen` offsets of a `width`-wide region flagged with `flag`, listed in a shuffled order.
Region make_region(std::uint32_t begin, std::size_t width, std::vector<std::size_t> chosen, std::uint8_t flag,
                   Rng& rng) {
  Region region;
  region.begin = begin;
  region.seen.assign(width, 0);
  for (std::size_t i = chosen.size(); i > 1; --i) std::swap(chosen[i - 1], chosen[rng.below(i)]);
  for (const std::size_t at : chosen) {
    region.seen[at] = flag;
    region.touched.push_back(begin + static_cast<std::uint32_t>(at));
  }
  return region;
}

std::vector<std::size_t> random_offsets(std::size_t width, std::size_t count, Rng& rng) {
  std::vector<std::size_t> all(width);
  std::iota(all.begin(), all.end(), std::size_t{0});
  for (std::size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng.below(width - i)]);
  all.resize(count);
  return all;
}

void expect_both_orders_sort(const Region& region, const std::string& what) {
  std::vector<std::uint32_t> expected = region.touched;
  std::sort(expected.begin(), expected.end());
  const hwy::Sorter sorter;
  for (const RegionOrder order : {RegionOrder::scan_flags, RegionOrder::sort_touched}) {
    std::vector<std::uint32_t> touched = region.touched;
    const std::vector<std::uint8_t> flags_before = region.seen;
    order_touched(order, region.seen, touched, region.begin, sorter);
    const char* path = order == RegionOrder::scan_flags ? "scan" : "sort";
    ASSERT_EQ(touched, expected) << what << ", " << path;
    ASSERT_EQ(region.seen, flags_before) << what << ", " << path << " changed a flag";
  }
}

TEST(RegionOrder, EveryWidthUpToSeventyAndEveryFillMatchesASort) {
  Rng rng(11);
  for (std::size_t width = 0; width <= 70; ++width) {
    for (std::size_t count = 0; count <= width; ++count) {
      for (int trial = 0; trial < 3; ++trial) {
        const Region region = make_region(500, width, random_offsets(width, count, rng), 1, rng);
        expect_both_orders_sort(region, "width " + std::to_string(width) + ", " + std::to_string(count) + " touched");
      }
    }
  }
}

TEST(RegionOrder, WideRegionsAtFillsFromOneEntryToFullMatchASort) {
  Rng rng(12);
  for (const std::size_t width : {1000, 4099, 100000}) {
    for (const std::size_t divisor : {1, 2, 3, 7, 8, 9, 64, 1000}) {
      const std::size_t count = std::max<std::size_t>(1, width / divisor);
      const Region region = make_region(0, width, random_offsets(width, count, rng), 1, rng);
      expect_both_orders_sort(region, "width " + std::to_string(width) + ", " + std::to_string(count) + " touched");
    }
  }
}

TEST(RegionOrder, TouchedRunsAtTheRegionsEndsAndOddFlags) {
  Rng rng(13);
  const std::size_t width = 1037;  // not a whole number of words
  for (const std::uint8_t flag : {std::uint8_t{1}, std::uint8_t{2}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
    for (const std::size_t run : {1, 7, 8, 9, 15, 16, 17, 300}) {
      std::vector<std::size_t> tail(run);
      std::iota(tail.begin(), tail.end(), width - run);  // the last `run` offsets
      expect_both_orders_sort(make_region(70, width, tail, flag, rng), "last " + std::to_string(run));
      std::vector<std::size_t> head(run);
      std::iota(head.begin(), head.end(), std::size_t{0});
      expect_both_orders_sort(make_region(70, width, head, flag, rng), "first " + std::to_string(run));
      std::vector<std::size_t> ends = head;
      for (std::size_t i = 0; i < run; ++i) ends.push_back(width - 1 - i);
      std::sort(ends.begin(), ends.end());
      ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
      expect_both_orders_sort(make_region(70, width, ends, flag, rng), "both ends, " + std::to_string(run));
    }
  }
}

TEST(RegionOrder, RegionsEndingAtTheLastIndex) {
  Rng rng(14);
  const std::size_t width = 5000;
  const auto begin = static_cast<std::uint32_t>(std::numeric_limits<std::uint32_t>::max() - width);
  for (const std::size_t count : {1, 9, 625, 5000}) {
    const Region region = make_region(begin, width, random_offsets(width, count, rng), 1, rng);
    expect_both_orders_sort(region, std::to_string(count) + " touched near 2^32");
  }
}

TEST(RegionOrder, TheRuleScansExactlyFromAnEighthFull) {
  for (const std::size_t touched : {1, 2, 1000, 3125000}) {
    const std::size_t widest_scanned = kRegionScanMaxWidthPerEntry * touched;
    EXPECT_EQ(region_order_for(widest_scanned, touched), RegionOrder::scan_flags) << touched;
    EXPECT_EQ(region_order_for(widest_scanned + 1, touched), RegionOrder::sort_touched) << touched;
    EXPECT_EQ(region_order_for(touched, touched), RegionOrder::scan_flags) << touched;
  }
  EXPECT_EQ(region_order_for(1, 0), RegionOrder::sort_touched);
}

}  // namespace
}  // namespace sparsgd::collectives
