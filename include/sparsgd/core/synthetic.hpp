#pragma once
// Synthetic gradients with known shapes, for benchmarks and tests: the same (distribution, seed)
// gives the same data on every machine.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd {

enum class Distribution {
  normal,    // N(0, 1)
  uniform,   // U(-1, 1)
  constant,  // every magnitude 0.5, random signs: all ties
  sparse,    // 99% zeros (both signs), 1% N(0, 1)
  heavy,     // standard Cauchy: heavy tails, a handful of huge values
};

// Throws InvalidArgument naming the accepted values.
Distribution parse_distribution(const std::string& name);
const char* to_string(Distribution distribution);
const std::vector<std::string>& distribution_names();

void fill_synthetic(std::span<float> out, Distribution distribution, std::uint64_t seed);

}  // namespace sparsgd

namespace sparsgd {

// A cheap synthetic gradient for worker `worker` at `iteration`: counter-based (each entry a hash
// of its position), so any worker's gradient can be regenerated anywhere without storing it.
// Entries are roughly normal (a sum of four uniforms) with a scale that differs per worker and a
// few percent of entries (a per-iteration random subset) ten times larger, so that top-k sets
// overlap between workers only in part, as real gradients do.
void fill_gradient(std::span<float> out, std::uint64_t seed, int worker, std::uint64_t iteration);

// A worker's selection drawn without a gradient: k distinct indices below n, uniformly at random,
// ascending, each with fill_gradient's value of that entry, so P workers' selections take O(P k)
// memory instead of P gradients of n floats (bench comm --selections drawn: aggregation at scale).
// shared_indices: every worker draws the same indices (what random-k with a shared seed selects),
// values still per worker. Deterministic in (seed, worker, iteration). Requires k <= n < 2^32.
void draw_selection(SparseVector& out, std::size_t n, std::size_t k, std::uint64_t seed, int worker,
                    std::uint64_t iteration, bool shared_indices = false);

}  // namespace sparsgd
