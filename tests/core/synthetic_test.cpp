#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <tuple>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/hash.hpp"
#include "sparsgd/core/synthetic.hpp"

namespace sparsgd {
namespace {

void expect_valid(const SparseVector& s, std::size_t n, std::size_t k) {
  ASSERT_EQ(s.dim, n);
  ASSERT_EQ(s.indices.size(), k);
  ASSERT_EQ(s.values.size(), k);
  for (std::size_t e = 0; e < k; ++e) {
    ASSERT_LT(s.indices[e], n);
    if (e > 0) {
      ASSERT_LT(s.indices[e - 1], s.indices[e]) << "not strictly ascending at " << e;
    }
  }
}

class DrawSelection : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(DrawSelection, DistinctAscendingWithTheGradientsValues) {
  const auto [n, k] = GetParam();
  std::vector<float> gradient(n);
  for (int worker : {0, 3}) {
    for (std::uint64_t iteration : {0u, 7u}) {
      SparseVector s;
      draw_selection(s, n, k, 5, worker, iteration);
      expect_valid(s, n, k);
      fill_gradient(gradient, 5, worker, iteration);
      for (std::size_t e = 0; e < k; ++e) ASSERT_EQ(s.values[e], gradient[s.indices[e]]);
      SparseVector again;
      draw_selection(again, n, k, 5, worker, iteration);
      EXPECT_EQ(again.indices, s.indices);
      EXPECT_EQ(again.values, s.values);
    }
  }
}

// Both paths: the sort-and-redraw one (k <= n / 16) and the bitmap one; the ends (k = 0, k = n).
INSTANTIATE_TEST_SUITE_P(Sizes, DrawSelection,
                         ::testing::Values(std::make_tuple(1, 0), std::make_tuple(1, 1), std::make_tuple(16, 1),
                                           std::make_tuple(17, 2), std::make_tuple(100, 50), std::make_tuple(100, 100),
                                           std::make_tuple(1000, 999), std::make_tuple(100000, 100),
                                           std::make_tuple(1u << 20, 1000)));

// The sets drawn are pinned: committed results (docs/results/comm/auto-runs.jsonl, bench comm --selections
// drawn) were measured on them, so a faster sort or another RNG must draw the very same indices.
// Digests of the sets as drawn with std::sort, before the sort became Highway's (both paths, shared
// indices, and the sweep's P = 256, n = 25M, density 0.01 with its last worker and exchange).
TEST(DrawSelectionWorkers, SetsArePinned) {
  struct Case {
    std::size_t n, k;
    std::uint64_t seed;
    int worker;
    std::uint64_t iteration;
    bool shared;
    std::uint64_t digest;
  };
  for (const Case& c : {Case{100000, 100, 5, 0, 0, false, 0xaf97a7fcd456c281ULL},
                        Case{1u << 20, 1000, 5, 3, 7, false, 0x51a4feb4978d2484ULL},
                        Case{25000000, 250000, 1, 255, 26, false, 0x4bd999aa0abac098ULL},
                        Case{1000000, 1000, 1, 2, 3, true, 0xfec58bb0e92682e7ULL},
                        Case{100, 50, 5, 0, 0, false, 0x24bac2068eba37faULL}}) {
    SparseVector s;
    draw_selection(s, c.n, c.k, c.seed, c.worker, c.iteration, c.shared);
    EXPECT_EQ(fnv1a(std::as_bytes(std::span(s.indices))), c.digest) << "n = " << c.n << ", k = " << c.k;
  }
}

TEST(DrawSelectionWorkers, IndependentUnlessShared) {
  const std::size_t n = 100000, k = 1000;
  SparseVector a, b;
  draw_selection(a, n, k, 1, 0, 0);
  draw_selection(b, n, k, 1, 1, 0);
  EXPECT_NE(a.indices, b.indices);
  std::vector<std::uint32_t> common;
  std::set_intersection(a.indices.begin(), a.indices.end(), b.indices.begin(), b.indices.end(),
                        std::back_inserter(common));
  // Independent uniform sets of 1,000 of 100,000 share about 10 indices.
  EXPECT_LT(common.size(), 40u);
  draw_selection(a, n, k, 1, 0, 0, true);
  draw_selection(b, n, k, 1, 1, 0, true);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_NE(a.values, b.values);  // values stay the worker's own
  SparseVector next;
  draw_selection(next, n, k, 1, 0, 1, true);
  EXPECT_NE(next.indices, a.indices);  // another iteration, another set
}

TEST(DrawSelectionWorkers, UniformOverTheIndexSpace) {
  // 200 draws of 50 of 1,000: every index expected 10 times; none far from it.
  const std::size_t n = 1000, k = 50;
  std::vector<int> hits(n, 0);
  for (std::uint64_t iteration = 0; iteration < 200; ++iteration) {
    SparseVector s;
    draw_selection(s, n, k, 9, 2, iteration);
    for (auto i : s.indices) ++hits[i];
  }
  EXPECT_LT(*std::max_element(hits.begin(), hits.end()), 30);
  int low_half = 0;
  for (std::size_t i = 0; i < n / 2; ++i) low_half += hits[i];
  EXPECT_NEAR(low_half, 5000, 300);
}

TEST(DrawSelectionWorkers, RefusesMoreEntriesThanTheLength) {
  SparseVector s;
  EXPECT_THROW(draw_selection(s, 10, 11, 1, 0, 0), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd
