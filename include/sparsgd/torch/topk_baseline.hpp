#pragma once
// What a PyTorch user runs today for top-k sparsification: torch::topk on |x|. Kept as a baseline
// for the selection benchmark. The header is torch-free; only the .cpp includes LibTorch.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparsgd::torch_layer {

// The version of the torch the layer was built against ("2.11.0+cu130"), for results that quote it.
const char* torch_version();

// Sets LibTorch's intra-op thread count (the benchmark uses 1, like the library's kernels).
void set_torch_threads(int threads);

// torch::topk(|x|, k) on a tensor viewing x (no copy of x; abs() allocates as in user code).
// Writes the selected indices and signed values (in torch's order, not sorted by index).
void torch_topk_abs(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& indices,
                    std::vector<float>& values);

}  // namespace sparsgd::torch_layer
