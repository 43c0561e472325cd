#include "sparsgd/select/rtopk.hpp"

#include <cmath>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/randk.hpp"

namespace sparsgd::select {

std::size_t rtopk_r(std::size_t n, std::size_t k, double r_factor) {
  SPARSGD_ENFORCE(std::isfinite(r_factor) && r_factor >= 1.0,
                  "rtopk r_factor must be a finite number >= 1, got " << r_factor);
  validate_k(n, k);
  const double r = std::ceil(r_factor * static_cast<double>(k));
  if (r >= static_cast<double>(n)) return n;
  return static_cast<std::size_t>(r);
}

void rtopk(std::span<const float> x, std::size_t k, double r_factor, std::uint64_t seed, SparseVector& out,
           RtopkWorkspace& workspace) {
  const std::size_t r = rtopk_r(x.size(), k, r_factor);
  topk(x, r, workspace.top_r, workspace.topk);
  workspace.positions.resize(k);
  // Positions within the top-r list, ascending, so the chosen indices stay ascending.
  random_k_indices(r, k, seed, workspace.positions, workspace.bitmap);
  out.dim = x.size();
  out.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    out.indices[i] = workspace.top_r.indices[workspace.positions[i]];
    out.values[i] = workspace.top_r.values[workspace.positions[i]];
  }
}

}  // namespace sparsgd::select
