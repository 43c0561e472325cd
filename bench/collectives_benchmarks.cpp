// Google Benchmark micro-benchmarks of the sparse aggregation's compute: the gTop-k merge alone,
// the compressed index codec's encoding and decoding of a set of the same size (the design asks
// that both together cost at most 10% of the merge: compare BM_TopkMerge/25000/0 with
// BM_IndexEncode/25000 + BM_IndexDecode/25000 of the same run), Ok-Topk's two ways of putting a
// reduced region in index order (BM_RegionOrder: where kRegionScanMaxWidthPerEntry should sit),
// and whole aggregate() calls over the in-process transport, timed as the busiest worker's thread
// CPU time (what the network model charges as compute between messages). Wire time is not here:
// `sparsgd bench comm --network ...` adds it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/blocks/region_order.hpp"
#include "collectives/blocks/sparse_merge.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/index_codec.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/select/topk.hpp"
#include "sparsgd/transport/local.hpp"

namespace {

using sparsgd::SparseVector;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A worker's top-k of its own normal gradient: what the aggregators receive in `bench comm`.
SparseVector local_topk(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::vector<float> x(n);
  sparsgd::fill_synthetic(x, sparsgd::Distribution::normal, seed);
  sparsgd::select::TopkWorkspace ws;
  SparseVector out;
  sparsgd::select::topk(x, k, out, ws);
  return out;
}

// Two sets of k entries whose indices overlap in a fraction `shared_percent` / 100.
void BM_TopkMerge(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const auto shared = static_cast<std::size_t>(state.range(1)) * k / 100;
  const std::size_t n = 1000 * k;
  sparsgd::Rng rng(7);
  std::vector<std::uint32_t> pool(3 * k);
  for (auto& i : pool) i = static_cast<std::uint32_t>(rng.below(n));
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  SparseVector a, b;
  a.dim = b.dim = n;
  // a takes the first k of a shuffled pool, b the first `shared` of those plus k - shared others.
  std::vector<std::uint32_t> order(pool.size());
  std::iota(order.begin(), order.end(), 0u);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  std::vector<std::uint32_t> ai(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<std::uint32_t> bi(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shared));
  bi.insert(bi.end(), order.begin() + static_cast<std::ptrdiff_t>(k),
            order.begin() + static_cast<std::ptrdiff_t>(2 * k - shared));
  std::sort(ai.begin(), ai.end());
  std::sort(bi.begin(), bi.end());
  for (auto i : ai) {
    a.indices.push_back(pool[i]);
    a.values.push_back(static_cast<float>(rng.uniform() - 0.5));
  }
  for (auto i : bi) {
    b.indices.push_back(pool[i]);
    b.values.push_back(static_cast<float>(rng.uniform() - 0.5));
  }
  sparsgd::collectives::TopkMerger merger;
  SparseVector out;
  std::vector<std::int32_t> a_pos, b_pos;
  for (auto _ : state) {
    merger.merge(view_of(a), view_of(b), k, out, a_pos, &b_pos);
    benchmark::DoNotOptimize(out.values.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * k));
}

// k distinct uniform indices of n = 1000 k (density 0.001), ascending.
std::vector<std::uint32_t> uniform_set(std::size_t k) {
  const std::size_t n = 1000 * k;
  sparsgd::Rng rng(11);
  std::vector<std::uint32_t> set;
  while (set.size() < k) {
    for (std::size_t i = set.size(); i < k; ++i) set.push_back(static_cast<std::uint32_t>(rng.below(n)));
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
  }
  return set;
}

void BM_IndexEncode(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const auto set = uniform_set(k);
  std::vector<std::byte> out;
  for (auto _ : state) {
    out.clear();
    sparsgd::index_codec::encode(set, static_cast<std::uint32_t>(1000 * k), out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bits_per_index"] = 8.0 * static_cast<double>(out.size()) / static_cast<double>(k);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * k));
}

void BM_IndexDecode(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const auto set = uniform_set(k);
  std::vector<std::byte> bytes;
  sparsgd::index_codec::encode(set, static_cast<std::uint32_t>(1000 * k), bytes);
  std::vector<std::uint32_t> out(k);
  for (auto _ : state) {
    sparsgd::index_codec::decode(bytes, static_cast<std::uint32_t>(1000 * k), out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * k));
}

// One region of `width` sums of which `width / fill_divisor` were touched, at random offsets, put in
// index order by the flags' pass (order 0) or the sort (order 1), then taken out as Ok-Topk does
// (take_ordered: index and sum copied, flag and sum cleared). Only that is timed; the flags and the
// unsorted list are restored outside the clock. The counter width_per_entry is what the rule
// compares with kRegionScanMaxWidthPerEntry: the crossover reads off as where the two orders' times
// meet.
void BM_RegionOrder(benchmark::State& state) {
  const auto width = static_cast<std::size_t>(state.range(0));
  const auto m = std::max<std::size_t>(1, width / static_cast<std::size_t>(state.range(1)));
  const auto order = state.range(2) == 0 ? sparsgd::collectives::RegionOrder::scan_flags
                                         : sparsgd::collectives::RegionOrder::sort_touched;
  constexpr std::uint32_t begin = 1000;
  std::vector<std::uint32_t> offsets(width);
  std::iota(offsets.begin(), offsets.end(), std::uint32_t{0});
  sparsgd::Rng rng(7);
  for (std::size_t i = 0; i < m; ++i) {  // a partial Fisher-Yates shuffle: m distinct offsets
    const std::size_t j = i + static_cast<std::size_t>(rng.below(width - i));
    std::swap(offsets[i], offsets[j]);
  }
  std::vector<std::uint32_t> first_seen(m);
  for (std::size_t i = 0; i < m; ++i) first_seen[i] = begin + offsets[i];
  std::vector<std::uint8_t> seen(width, 0);
  std::vector<float> sums(width, 0.0f);
  std::vector<std::uint32_t> touched;
  std::vector<std::uint32_t> indices(m);
  std::vector<float> values(m);
  const hwy::Sorter sorter;
  for (auto _ : state) {
    state.PauseTiming();
    touched = first_seen;
    for (const std::uint32_t index : touched) {
      seen[index - begin] = 1;
      sums[index - begin] = 1.0f;
    }
    state.ResumeTiming();
    sparsgd::collectives::order_touched(order, seen, touched, begin, sorter);
    sparsgd::collectives::take_ordered(touched, begin, sums, seen, indices, values);
    benchmark::DoNotOptimize(indices.data());
    benchmark::DoNotOptimize(values.data());
  }
  if (!std::is_sorted(indices.begin(), indices.end())) state.SkipWithError("the region came out of index order");
  state.counters["m"] = static_cast<double>(m);
  state.counters["width_per_entry"] = static_cast<double>(width) / static_cast<double>(m);
}

// Region widths n / P of the sweep's points (n = 1M and 25M; P = 4, 32, 256), each filled from half
// down to 1/1024: the fills where Ok-Topk's rule switches lie within.
void region_order_grid(benchmark::internal::Benchmark* b) {
  for (const std::int64_t width : {3906, 97656, 781250, 6250000}) {
    for (const std::int64_t divisor : {2, 4, 6, 8, 10, 12, 16, 32, 64, 256, 1024}) {
      if (width / divisor < 2) continue;
      for (const std::int64_t order : {0, 1}) b->Args({width, divisor, order});
    }
  }
}

// One aggregate() per worker and benchmark iteration; the iteration's time is the largest thread
// CPU time any worker spent inside aggregate(), waits excluded.
void BM_Aggregate(benchmark::State& state, const char* aggregator) {
  const int workers = static_cast<int>(state.range(0));
  const auto k = static_cast<std::size_t>(state.range(1));
  const std::size_t n = 1000 * k;
  std::vector<SparseVector> locals;
  for (int r = 0; r < workers; ++r) locals.push_back(local_topk(n, k, 100 + static_cast<std::uint64_t>(r)));
  std::vector<std::unique_ptr<sparsgd::collectives::Aggregator>> aggregators;
  for (int r = 0; r < workers; ++r) aggregators.push_back(sparsgd::collectives::make_aggregator(aggregator));
  std::vector<sparsgd::collectives::Aggregation> results(static_cast<std::size_t>(workers));
  for (auto _ : state) {
    std::mutex mutex;
    double busiest = 0.0;
    sparsgd::transport::run_local_workers(workers, [&](sparsgd::transport::Transport& t) {
      const auto r = static_cast<std::size_t>(t.rank());
      const double start = thread_cpu_seconds();
      aggregators[r]->aggregate(t, locals[r], k, results[r]);
      const double spent = thread_cpu_seconds() - start;
      std::lock_guard lock(mutex);
      busiest = std::max(busiest, spent);
    });
    state.SetIterationTime(busiest);
  }
}

}  // namespace

BENCHMARK(BM_TopkMerge)->Args({25000, 0})->Args({25000, 10})->Args({25000, 90})->Args({1000, 0});
BENCHMARK(BM_IndexEncode)->Arg(25000)->Arg(1000);
BENCHMARK(BM_IndexDecode)->Arg(25000)->Arg(1000);
BENCHMARK(BM_RegionOrder)->Apply(region_order_grid);

// Every registered aggregator of sparse selections that forms its own sum (not one that needs
// shared indices, sums densely or delegates), so that a new one is measured without touching this file.
int main(int argc, char** argv) {
  for (const sparsgd::collectives::AggregatorDescriptor* d : sparsgd::collectives::aggregator_descriptors()) {
    const sparsgd::collectives::AggregatorProperties& p = d->properties;
    if (!p.sends_indices || p.delegates || p.needs_shared_indices || p.dense_result) continue;
    const char* name = d->name.data();  // a registry name: a string literal, so null-terminated
    benchmark::RegisterBenchmark(("BM_Aggregate/" + std::string(d->name)).c_str(),
                                 [name](benchmark::State& state) { BM_Aggregate(state, name); })
        ->Args({2, 25000})
        ->Args({4, 25000})
        ->UseManualTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
