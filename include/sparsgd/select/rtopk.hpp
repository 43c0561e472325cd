#pragma once
// r-top-k (Barnes et al., 2020): the top r = ceil(r_factor * k) entries by magnitude, then a
// uniformly random k of those.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::select {

// r = min(n, ceil(r_factor * k)). Throws InvalidArgument unless r_factor is finite and >= 1.
std::size_t rtopk_r(std::size_t n, std::size_t k, double r_factor);

struct RtopkWorkspace {
  TopkWorkspace topk;
  SparseVector top_r;
  std::vector<std::uint32_t> positions;
  std::vector<std::uint64_t> bitmap;
};

// Resizes `out` to k entries (ascending indices) chosen uniformly among the top r of x, with ties
// at the r-th magnitude broken by lower index as in topk. Throws like topk, and on a bad r_factor.
void rtopk(std::span<const float> x, std::size_t k, double r_factor, std::uint64_t seed, SparseVector& out,
           RtopkWorkspace& workspace);

}  // namespace sparsgd::select
