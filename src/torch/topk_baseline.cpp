#include "sparsgd/torch/topk_baseline.hpp"

#include <torch/torch.h>

#include "sparsgd/core/density.hpp"

namespace sparsgd::torch_layer {

const char* torch_version() { return SPARSGD_TORCH_VERSION; }

void set_torch_threads(int threads) { torch::set_num_threads(threads); }

void torch_topk_abs(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& indices,
                    std::vector<float>& values) {
  validate_k(x.size(), k);
  // from_blob does not own or copy; const_cast is safe because nothing writes through it.
  const auto tensor = torch::from_blob(const_cast<float*>(x.data()), {static_cast<std::int64_t>(x.size())},
                                       torch::TensorOptions().dtype(torch::kFloat32));
  const auto [top_values, top_indices] = torch::topk(tensor.abs(), static_cast<std::int64_t>(k));
  const auto idx = top_indices.accessor<std::int64_t, 1>();
  indices.resize(k);
  values.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    indices[i] = static_cast<std::uint32_t>(idx[static_cast<std::int64_t>(i)]);
    values[i] = x[indices[i]];
  }
}

}  // namespace sparsgd::torch_layer
