#pragma once
// The built-in compressors; make_compressor (compressor.cpp) is the only way to name them.

#include <memory>

#include "sparsgd/compress/compressor.hpp"

namespace sparsgd::compress {

std::unique_ptr<Compressor> make_topk_compressor();
std::unique_ptr<Compressor> make_reused_threshold_compressor(std::uint64_t period);
std::unique_ptr<Compressor> make_randk_compressor(std::uint64_t seed, bool shared_seed, bool unbiased);
std::unique_ptr<Compressor> make_rtopk_compressor(double r_factor, std::uint64_t seed);
std::unique_ptr<Compressor> make_gaussiank_compressor();
std::unique_ptr<Compressor> make_dgc_compressor();
std::unique_ptr<Compressor> make_dense_compressor();

}  // namespace sparsgd::compress
