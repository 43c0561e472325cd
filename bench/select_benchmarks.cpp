// Google Benchmark micro-benchmarks of the selection kernels across sizes and densities. The
// side-by-side comparison with baselines is `sparsgd bench select`; these track one kernel's
// scaling with n and k.
#include <benchmark/benchmark.h>

#include <vector>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/topk.hpp"

namespace {

std::vector<float> data(std::size_t n) {
  std::vector<float> x(n);
  sparsgd::fill_synthetic(x, sparsgd::Distribution::normal, 1);
  return x;
}

void BM_ReadPass(benchmark::State& state) {
  const auto x = data(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(sparsgd::select::max_magnitude_key(x));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0) * 4);
}

void BM_Topk(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto x = data(n);
  const std::size_t k = sparsgd::k_from_density(n, 1.0 / static_cast<double>(state.range(1)));
  sparsgd::select::TopkWorkspace ws;
  sparsgd::SparseVector out;
  for (auto _ : state) {
    sparsgd::select::topk(x, k, out, ws);
    benchmark::DoNotOptimize(out.indices.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0) * 4);
}

}  // namespace

BENCHMARK(BM_ReadPass)->Arg(1 << 20)->Arg(1 << 24);
BENCHMARK(BM_Topk)->Args({1 << 20, 1000})->Args({1 << 24, 1000})->Args({1 << 24, 100})->Args({1 << 24, 10000});
BENCHMARK_MAIN();
