#include "sparsgd/compress/compressor.hpp"

#include "compress/compressors.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/rtopk.hpp"

namespace sparsgd::compress {

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = {"topk", "topk-reuse", "randk", "randk-unbiased", "rtopk", "gaussiank", "dgc", "none"};
  return names;
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config) {
  const std::string& name = config.name;
  if (name == "topk") return make_topk_compressor();
  if (name == "randk") return make_randk_compressor(config.seed, config.shared_seed, false);
  if (name == "randk-unbiased") return make_randk_compressor(config.seed, config.shared_seed, true);
  if (name == "rtopk") {
    select::rtopk_r(1, 1, config.r_factor);  // validates r_factor up front
    return make_rtopk_compressor(config.r_factor, config.seed);
  }
  if (name == "topk-reuse") {
    if (config.threshold_period == 0) throw InvalidArgument("the threshold period of topk-reuse must be at least 1");
    return make_reused_threshold_compressor(config.threshold_period);
  }
  if (name == "gaussiank") return make_gaussiank_compressor();
  if (name == "dgc") return make_dgc_compressor();
  if (name == "none" || name == "dense") return make_dense_compressor();
  throw InvalidArgument("unknown compressor '" + name + "' (expected topk, topk-reuse, randk, randk-unbiased, rtopk, gaussiank, dgc or none)");
}

}  // namespace sparsgd::compress
