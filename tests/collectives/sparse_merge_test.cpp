// The gTop-k merge and its kernels against plain implementations: the merge against a union built
// in a std::map and a full sort, the shared-index search against std::set_intersection, the k-th
// largest key against std::nth_element, the compaction against a loop. Sizes from 0 to tens of
// thousands (past the sampled selection's minimum and every vector width), overlaps from none to
// complete, many ties at the threshold, zeros, and indices up to 2^32 - 2.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/blocks/merge_kernels.hpp"
#include "hwy/targets.h"
#include "collectives/blocks/sparse_merge.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::collectives {
namespace {

// How a side's values are drawn: continuous, or from a few levels (so that many tie).
enum class Values { continuous, few_levels, zeros_and_ones };

std::vector<std::uint32_t> ascending_indices(Rng& rng, std::size_t count, std::uint64_t range, std::uint64_t offset) {
  std::vector<std::uint32_t> out;
  while (out.size() < count) {
    for (std::size_t i = out.size(); i < count; ++i) out.push_back(static_cast<std::uint32_t>(offset + rng.below(range)));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

float draw(Rng& rng, Values kind) {
  switch (kind) {
    case Values::continuous: return static_cast<float>(rng.uniform() * 2.0 - 1.0);
    case Values::few_levels: return static_cast<float>(static_cast<int>(rng.below(7)) - 3) * 0.5f;
    case Values::zeros_and_ones: return rng.below(2) ? 1.0f : 0.0f;
  }
  return 0.0f;
}

// Two sides of sizes na and nb over [offset, offset + range), sharing about `shared` of the smaller.
std::pair<SparseVector, SparseVector> make_sides(Rng& rng, std::size_t na, std::size_t nb, double shared,
                                                 std::uint64_t range, std::uint64_t offset, Values kind) {
  const auto pool = ascending_indices(rng, na + nb, range, offset);
  std::vector<std::uint32_t> ai, bi;
  std::vector<std::uint8_t> taken(pool.size(), 0);
  // a: a random na of the pool; b: `shared` of a's, then the rest from what a did not take.
  std::vector<std::size_t> order(pool.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  for (std::size_t i = 0; i < na; ++i) {
    ai.push_back(pool[order[i]]);
    taken[order[i]] = 1;
  }
  const auto from_a = static_cast<std::size_t>(shared * static_cast<double>(std::min(na, nb)));
  for (std::size_t i = 0; i < from_a; ++i) bi.push_back(ai[i]);
  for (std::size_t i = na; bi.size() < nb && i < order.size(); ++i) bi.push_back(pool[order[i]]);
  std::sort(ai.begin(), ai.end());
  std::sort(bi.begin(), bi.end());
  SparseVector a, b;
  a.dim = b.dim = static_cast<std::size_t>(offset + range);
  a.indices = ai;
  b.indices = bi;
  for (std::size_t i = 0; i < ai.size(); ++i) a.values.push_back(draw(rng, kind));
  for (std::size_t i = 0; i < bi.size(); ++i) b.values.push_back(draw(rng, kind));
  return {a, b};
}

struct ReferenceMerge {
  SparseVector out;
  std::vector<std::int32_t> own_position, incoming_position;
};

// The semantics spelled out: union by index (own + incoming where both hold one), the k largest
// |value| with ties by lower index, ascending by index; each input entry's position in the result.
// Plain sorts over one array of the union (std::map made the sanitizer runs slow).
ReferenceMerge reference_merge(const SparseVector& own, const SparseVector& incoming, std::size_t k) {
  struct Entry {
    std::uint32_t index;
    float value;
    std::int64_t own = -1, incoming = -1;  // the input entries it holds
  };
  std::vector<Entry> all;
  for (std::size_t i = 0; i < own.size(); ++i) all.push_back({own.indices[i], own.values[i], static_cast<std::int64_t>(i), -1});
  for (std::size_t j = 0; j < incoming.size(); ++j) {
    all.push_back({incoming.indices[j], incoming.values[j], -1, static_cast<std::int64_t>(j)});
  }
  // Own entries come first, so after a stable sort an index held by both is (own, incoming).
  std::stable_sort(all.begin(), all.end(), [](const Entry& x, const Entry& y) { return x.index < y.index; });
  std::vector<Entry> united;
  for (const Entry& e : all) {
    if (!united.empty() && united.back().index == e.index) {
      united.back().value = united.back().value + e.value;
      united.back().incoming = e.incoming;
    } else {
      united.push_back(e);
    }
  }
  std::sort(united.begin(), united.end(), [](const Entry& x, const Entry& y) {
    const float ax = std::fabs(x.value), ay = std::fabs(y.value);
    return ax != ay ? ax > ay : x.index < y.index;
  });
  united.resize(std::min(k, united.size()));
  std::sort(united.begin(), united.end(), [](const Entry& x, const Entry& y) { return x.index < y.index; });
  ReferenceMerge r;
  r.out.dim = own.dim;
  r.own_position.assign(own.size(), kDropped);
  r.incoming_position.assign(incoming.size(), kDropped);
  for (const Entry& e : united) {
    const auto at = static_cast<std::int32_t>(r.out.size());
    r.out.indices.push_back(e.index);
    r.out.values.push_back(e.value);
    if (e.own >= 0) r.own_position[static_cast<std::size_t>(e.own)] = at;
    if (e.incoming >= 0) r.incoming_position[static_cast<std::size_t>(e.incoming)] = at;
  }
  return r;
}

void expect_merge_matches(const SparseVector& own, const SparseVector& incoming, std::size_t k, TopkMerger& merger) {
  const ReferenceMerge want = reference_merge(own, incoming, k);
  // With the incoming entries tracked and without, and with inputs the merger may overwrite: the
  // same result and positions. Modes 1 and 2 ask for the positions apart from the merge, as
  // gtopk-rd does while its next message is in flight.
  for (const int mode : {0, 1, 2}) {
    const bool track_incoming = mode != 1;
    SCOPED_TRACE(mode == 0 ? "incoming tracked" : mode == 1 ? "incoming not tracked" : "inputs writable");
    SparseVector got;
    std::vector<std::int32_t> own_position, incoming_position;
    SparseVector own_copy = own, incoming_copy = incoming;
    const WritableInputs writable =
        mode == 2 ? WritableInputs{own_copy.values.data(), incoming_copy.values.data()} : WritableInputs{};
    if (mode == 0) {
      merger.merge(view_of(own_copy), view_of(incoming_copy), k, got, own_position, &incoming_position, writable);
    } else {
      got.dim = own.dim;
      const std::size_t m = merger.merge(
          view_of(own_copy), view_of(incoming_copy), k,
          [&got](std::size_t size) {
            got.resize(size);
            return TopkMerger::Destination{got.indices.data(), got.values.data()};
          },
          writable, track_incoming ? TopkMerger::Track::own_and_incoming : TopkMerger::Track::own);
      ASSERT_EQ(m, got.size());
      if (!track_incoming) {
        ASSERT_THROW(merger.positions(own_position, &incoming_position), sparsgd::Error);
      }
      std::vector<std::uint8_t> survived;
      merger.own_survived(survived);
      ASSERT_EQ(survived.size(), own.size());
      for (std::size_t i = 0; i < own.size(); ++i) {
        ASSERT_EQ(survived[i] == 1, want.own_position[i] != kDropped) << "own entry " << i;
      }
      merger.positions(own_position, track_incoming ? &incoming_position : nullptr);
    }
    ASSERT_EQ(got.dim, want.out.dim);
    ASSERT_EQ(got.indices, want.out.indices);
    ASSERT_EQ(got.values, want.out.values);
    ASSERT_EQ(own_position, want.own_position);
    if (track_incoming) {
      ASSERT_EQ(incoming_position, want.incoming_position);
    }
  }
}

struct MergeCase {
  std::size_t na, nb, k;
  double shared;
  Values kind;
  std::uint64_t offset;  // indices start here; near 2^32 checks the sentinel's margin
};

// For CTest's listing: the case as its name says it, not as 48 bytes.
void PrintTo(const MergeCase& c, std::ostream* os) {
  *os << c.na << " + " << c.nb << " entries, k " << c.k << ", " << c.shared * 100 << "% shared"
      << (c.offset > 0 ? ", high indices" : "");
}

std::string merge_case_name(const ::testing::TestParamInfo<MergeCase>& info) {
  const MergeCase& c = info.param;
  const char* kind = c.kind == Values::continuous ? "cont" : c.kind == Values::few_levels ? "levels" : "zeros";
  // A stream rather than string concatenation: GCC 12 warns falsely (-Wrestrict) on the latter.
  std::ostringstream name;
  name << 'a' << c.na << "_b" << c.nb << "_k" << c.k << "_s" << static_cast<int>(c.shared * 100) << '_' << kind
       << (c.offset > 0 ? "_high" : "");
  return name.str();
}

class MergeAgainstReference : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergeAgainstReference, EqualsTheReference) {
  const MergeCase& c = GetParam();
  Rng rng(1000 + c.na * 7 + c.nb * 13 + c.k);
  TopkMerger merger;
  // Rounds through one merger: its buffers are reused, as the aggregators reuse them.
  for (int round = 0; round < 2; ++round) {
    const std::uint64_t range = std::max<std::uint64_t>(4 * (c.na + c.nb), 64);
    auto [a, b] = make_sides(rng, c.na, c.nb, c.shared, range, c.offset, c.kind);
    SCOPED_TRACE("round " + std::to_string(round));
    expect_merge_matches(a, b, c.k, merger);
  }
}

std::vector<MergeCase> merge_cases() {
  std::vector<MergeCase> cases;
  const std::uint64_t high = std::numeric_limits<std::uint32_t>::max() - 200000;  // indices up to 2^32 - 2
  for (const Values kind : {Values::continuous, Values::few_levels, Values::zeros_and_ones}) {
    for (const double shared : {0.0, 0.1, 0.5, 1.0}) {
      cases.push_back({0, 0, 1, shared, kind, 0});
      cases.push_back({1, 0, 1, shared, kind, 0});
      cases.push_back({0, 1, 1, shared, kind, 0});
      cases.push_back({1, 1, 1, shared, kind, 0});
      cases.push_back({5, 3, 4, shared, kind, 0});
      cases.push_back({17, 33, 20, shared, kind, 0});
      cases.push_back({100, 100, 100, shared, kind, 0});
      cases.push_back({100, 100, 250, shared, kind, 0});  // everything fits
      cases.push_back({1000, 1000, 1, shared, kind, 0});
      cases.push_back({1000, 999, 1000, shared, kind, 0});
      cases.push_back({12000, 12000, 12000, shared, kind, 0});  // the sampled k-th key path
      cases.push_back({25000, 25000, 25000, shared, kind, 0});
      cases.push_back({20000, 5000, 9000, shared, kind, 0});
      cases.push_back({3000, 3000, 3000, shared, kind, high});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sides, MergeAgainstReference, ::testing::ValuesIn(merge_cases()), merge_case_name);

TEST(MergeIndexLimits, IndicesAtBothEndsOfTheRange) {
  // Index 0 and 2^32 - 2 (the largest below n = 2^32 - 1), on both sides and shared.
  const std::uint32_t top = std::numeric_limits<std::uint32_t>::max() - 1;
  SparseVector a, b;
  a.dim = b.dim = std::numeric_limits<std::uint32_t>::max();
  a.indices = {0, 5, top};
  a.values = {1.0f, -2.0f, 3.0f};
  b.indices = {0, 7, top};
  b.values = {0.5f, 4.0f, -3.5f};
  TopkMerger merger;
  for (std::size_t k = 1; k <= 5; ++k) {
    SCOPED_TRACE("k = " + std::to_string(k));
    expect_merge_matches(a, b, k, merger);
  }
}

// Runs `check` once for every SIMD target this machine can run that the library was compiled for
// (runtime dispatch picks only the best one, so the others would go untested here).
void for_each_target(const std::function<void()>& check) {
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    check();
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

TEST(MergePairs, MatchesStdMerge) {
  // Sizes around the vector width and the vector path's minimum (64 outputs), and large; the two
  // sides interleaved at random, in runs, or one wholly before the other; indices up to 2^32 - 2.
  Rng rng(21);
  const std::vector<std::pair<std::size_t, std::size_t>> sizes = {
      {0, 0}, {1, 0}, {0, 1}, {1, 1}, {7, 9}, {8, 8}, {31, 32}, {32, 32}, {0, 64}, {64, 0}, {33, 31},
      {40, 41}, {100, 3}, {3, 100}, {1000, 1000}, {12500, 12500}, {20000, 5000}};
  for (const auto& [na, nb] : sizes) {
    for (const int layout : {0, 1, 2, 3}) {
      SCOPED_TRACE(std::to_string(na) + " + " + std::to_string(nb) + ", layout " + std::to_string(layout));
      const std::uint64_t offset = layout == 3 ? std::uint64_t{4'290'000'000} : 0;
      const auto pool = ascending_indices(rng, na + nb, 4 * (na + nb) + 10, offset);
      std::vector<std::uint64_t> a, b;
      for (std::size_t i = 0; i < pool.size(); ++i) {
        bool to_a = false;
        switch (layout) {
          case 0: case 3: to_a = rng.below(2) == 0; break;
          case 1: to_a = (i / 13) % 2 == 0; break;  // runs of 13
          default: to_a = i < na; break;            // all of a first
        }
        if ((to_a && a.size() < na) || b.size() == nb) {
          a.push_back((std::uint64_t{pool[i]} << 32) | rng.below(std::uint64_t{1} << 32));
        } else {
          b.push_back((std::uint64_t{pool[i]} << 32) | rng.below(std::uint64_t{1} << 32));
        }
      }
      std::vector<std::uint64_t> want(a.size() + b.size());
      std::merge(a.begin(), a.end(), b.begin(), b.end(), want.begin());
      const std::size_t ca = a.size(), cb = b.size();
      a.resize(ca + kMergePadding, ~std::uint64_t{0});
      b.resize(cb + kMergePadding, ~std::uint64_t{0});
      for_each_target([&] {
        // Exactly as long as the result, so that a write past it shows (under the sanitizers).
        std::vector<std::uint32_t> indices(want.size());
        std::vector<float> values(want.size());
        merge_pairs(a.data(), ca, b.data(), cb, indices.data(), values.data());
        for (std::size_t u = 0; u < want.size(); ++u) {
          std::uint32_t bits;
          std::memcpy(&bits, &values[u], 4);
          ASSERT_EQ(indices[u], static_cast<std::uint32_t>(want[u] >> 32)) << "output " << u;
          ASSERT_EQ(bits, static_cast<std::uint32_t>(want[u])) << "output " << u;
        }
      });
    }
  }
}

TEST(SharedIndices, MatchSetIntersection) {
  Rng rng(5);
  for (const std::size_t na : {0u, 1u, 3u, 15u, 16u, 17u, 100u, 4099u, 25000u}) {
    for (const std::size_t nb : {0u, 1u, 8u, 31u, 100u, 5000u, 25000u}) {
      for (const double shared : {0.0, 0.05, 0.3, 1.0}) {
        for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{3'000'000'000}}) {
          // Named, not a structured binding: clang (the sanitizer build) cannot capture one in a lambda.
          const auto sides = make_sides(rng, na, nb, shared, 3 * (na + nb) + 10, offset, Values::continuous);
          const SparseVector& a = sides.first;
          const SparseVector& b = sides.second;
          std::vector<std::uint32_t> want;
          std::set_intersection(a.indices.begin(), a.indices.end(), b.indices.begin(), b.indices.end(),
                                std::back_inserter(want));
          for_each_target([&] {
            std::vector<std::uint32_t> a_pos(std::min(na, nb) + 1), b_pos(std::min(na, nb) + 1);
            const std::size_t count = find_shared_indices(a.indices, b.indices, a_pos.data(), b_pos.data());
            ASSERT_EQ(count, want.size()) << na << " x " << nb << " shared " << shared;
            for (std::size_t s = 0; s < count; ++s) {
              ASSERT_EQ(a.indices[a_pos[s]], want[s]);
              ASSERT_EQ(b.indices[b_pos[s]], want[s]);
            }
          });
        }
      }
    }
  }
}

TEST(SharedIndices, EveryIndexShared) {
  std::vector<std::uint32_t> a(1000);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint32_t>(3 * i + 1);
  for_each_target([&] {
    std::vector<std::uint32_t> a_pos(a.size() + 1), b_pos(a.size() + 1);
    ASSERT_EQ(find_shared_indices(a, a, a_pos.data(), b_pos.data()), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a_pos[i], i);
      ASSERT_EQ(b_pos[i], i);
    }
  });
}

// Keys drawn in several shapes, including some built to mislead a strided sample.
std::vector<std::uint32_t> keys_of_shape(Rng& rng, std::size_t n, int shape) {
  std::vector<std::uint32_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (shape) {
      case 0: keys[i] = select::magnitude_key(static_cast<float>(rng.uniform())); break;
      case 1: keys[i] = 1 + static_cast<std::uint32_t>(rng.below(3)); break;            // three values
      case 2: keys[i] = 42; break;                                                      // all equal
      case 3: keys[i] = static_cast<std::uint32_t>(i); break;                           // ascending
      case 4: keys[i] = (i % 64 == 32) ? 0x7F000000u : static_cast<std::uint32_t>(rng.below(100)); break;
      default: keys[i] = static_cast<std::uint32_t>(rng.below(std::uint64_t{1} << 31)); break;
    }
  }
  return keys;
}

TEST(KthLargestOfKeys, MatchesNthElement) {
  Rng rng(9);
  std::vector<std::uint32_t> scratch;
  for (const std::size_t n : {1u, 2u, 100u, 8191u, 8192u, 50000u}) {
    for (int shape = 0; shape <= 5; ++shape) {
      const auto keys = keys_of_shape(rng, n, shape);
      for (const std::size_t k : {std::size_t{1}, n / 3 + 1, n / 2 + 1, n}) {
        if (k < 1 || k > n) continue;
        const select::KthKey got = select::kth_largest_of_keys(keys, k, scratch);
        auto sorted = keys;
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k - 1), sorted.end(),
                         std::greater<>());
        const std::uint32_t want = sorted[k - 1];
        std::size_t greater = 0, equal = 0;
        for (const std::uint32_t key : keys) {
          greater += key > want;
          equal += key == want;
        }
        ASSERT_EQ(got.key, want) << "n " << n << " shape " << shape << " k " << k;
        ASSERT_EQ(got.greater, greater) << "n " << n << " shape " << shape << " k " << k;
        ASSERT_EQ(got.equal, equal) << "n " << n << " shape " << shape << " k " << k;
      }
    }
  }
}

// With a keys array, and with the keys made from the values (magnitude key + 1).
TEST(CompactSelected, MatchesALoop) {
  Rng rng(11);
  for (const bool from_values : {false, true}) {
    for (const std::size_t n : {0u, 1u, 7u, 16u, 33u, 1000u}) {
      std::vector<std::uint32_t> keys(n), idx(n);
      std::vector<float> val(n);
      for (std::size_t i = 0; i < n; ++i) {
        // Values from a few magnitudes and both signs, so that keys tie.
        val[i] = static_cast<float>(static_cast<int>(rng.below(8)) - 4) * 0.25f;
        keys[i] = from_values ? select::magnitude_key(val[i]) + 1 : static_cast<std::uint32_t>(rng.below(8));
        idx[i] = static_cast<std::uint32_t>(i * 1000003u + (i % 2 ? 0x90000000u : 0u));
      }
      const SelectionKeys selection{from_values ? nullptr : keys.data(), n};
      std::vector<std::uint32_t> thresholds = {0u, 3u, 7u};
      if (from_values) thresholds = {1u, select::magnitude_key(0.5f) + 1, select::magnitude_key(1.0f) + 1};
      for (const std::uint32_t threshold : thresholds) {
        for (const std::uint32_t cutoff : {0u, 5000000u, 0x90000000u, std::numeric_limits<std::uint32_t>::max()}) {
          std::vector<std::uint64_t> out_pairs(n + kCompactPadding), unpositioned(n + kCompactPadding);
          std::vector<std::uint32_t> out_pos(n + kCompactPadding);
          const std::size_t count = compact_selected(selection, idx.data(), val.data(), threshold, cutoff,
                                                     out_pairs.data(), out_pos.data());
          // Without positions: the same pairs.
          ASSERT_EQ(compact_selected(selection, idx.data(), val.data(), threshold, cutoff, unpositioned.data(), nullptr),
                    count);
          ASSERT_TRUE(std::equal(out_pairs.begin(), out_pairs.begin() + static_cast<std::ptrdiff_t>(count),
                                 unpositioned.begin()));
          std::vector<std::uint32_t> ties(n + kCompactPadding);
          const std::size_t tie_count = indices_with_key(selection, val.data(), idx.data(), threshold, ties.data());
          std::size_t w = 0, t = 0;
          for (std::size_t i = 0; i < n; ++i) {
            if (keys[i] == threshold) {
              ASSERT_LT(t, tie_count);
              ASSERT_EQ(ties[t++], idx[i]);
            }
            if (keys[i] > threshold || (keys[i] == threshold && idx[i] <= cutoff)) {
              ASSERT_LT(w, count);
              ASSERT_EQ(out_pairs[w] >> 32, idx[i]);
              ASSERT_EQ(std::bit_cast<float>(static_cast<std::uint32_t>(out_pairs[w])), val[i]);
              ASSERT_EQ(out_pos[w], i);
              ++w;
            }
          }
          ASSERT_EQ(count, w) << "n " << n << " threshold " << threshold << " cutoff " << cutoff;
          ASSERT_EQ(tie_count, t);
        }
      }
    }
  }
}

// The k-th largest key made from two arrays of values, against nth_element over the keys.
TEST(KthLargestOfValues, MatchesNthElement) {
  Rng rng(13);
  std::vector<std::uint32_t> scratch;
  for (const std::size_t na : {0u, 1u, 5000u, 25000u}) {
    for (const std::size_t nb : {1u, 4000u, 25000u}) {
      for (const int levels : {0, 5}) {  // continuous values, or five magnitudes (many ties)
        std::vector<float> a(na), b(nb);
        auto draw_value = [&] {
          return levels == 0 ? static_cast<float>(rng.uniform() * 8.0 - 4.0)
                             : static_cast<float>(static_cast<int>(rng.below(2 * levels + 1)) - levels);
        };
        for (float& v : a) v = draw_value();
        for (float& v : b) v = draw_value();
        std::vector<std::uint32_t> keys;
        for (const float v : a) keys.push_back(select::magnitude_key(v) + 1);
        for (const float v : b) keys.push_back(select::magnitude_key(v) + 1);
        const std::size_t n = keys.size();
        for (const std::size_t k : {std::size_t{1}, n / 2 + 1, n}) {
          if (k > n) continue;
          const select::KthKey got = select::kth_largest_of_values(a, b, 1, k, scratch);
          auto sorted = keys;
          std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k - 1), sorted.end(),
                           std::greater<>());
          std::size_t greater = 0, equal = 0;
          for (const std::uint32_t key : keys) {
            greater += key > sorted[k - 1];
            equal += key == sorted[k - 1];
          }
          ASSERT_EQ(got.key, sorted[k - 1]) << na << " + " << nb << " k " << k;
          ASSERT_EQ(got.greater, greater) << na << " + " << nb << " k " << k;
          ASSERT_EQ(got.equal, equal) << na << " + " << nb << " k " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sparsgd::collectives
