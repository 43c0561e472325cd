#pragma once
// Compressors: the local selection one worker makes from its accumulated gradient (docs/DESIGN.md).
// Each one is described by its descriptor (compress/descriptor.hpp) in its own file.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::compress {

// What a compressor may depend on besides the data: random compressors draw from
// (seed, iteration) and, unless they share the seed, the worker's rank.
struct CompressContext {
  std::uint64_t iteration = 0;
  int rank = 0;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  // True for "none": the aggregator should exchange all n values densely.
  virtual bool dense() const { return false; }
  // True when every worker picks the same indices in the same iteration (randk with a shared
  // seed), so that values can be summed with a plain allreduce of k floats.
  virtual bool shared_indices() const { return false; }
  // The factor between a sent value and acc's entry: 1, except for unbiased estimators
  // (randk-unbiased: n / k), whose sent vector equals acc only in expectation. Error feedback
  // cannot account for a scaled value, so those run without it (ExchangeConfig::error_feedback).
  virtual double value_scale(std::size_t /*n*/, std::size_t /*k*/) const { return 1.0; }
  // Whether value_scale is ever other than 1.
  virtual bool scales_values() const { return false; }
  // Selects entries of acc into out (out.dim = acc.size(), ascending indices). k is the target
  // count: exact for topk, randk, rtopk and none (which selects all n); within
  // [ceil(0.8k), floor(1.25k)] for gaussiank, dgc and topk-reuse (select/threshold.hpp). Throws InvalidArgument
  // on a bad k and InvalidData if acc holds NaN or Inf.
  virtual void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                        SparseVector& out) = 0;
  // The compressors that draw at random (randk and randk-unbiased: indices of acc, count = n;
  // rtopk: places in its top-r list, count = r): the k distinct positions of [0, count) that
  // compress() draws in this context, ascending, so that a selection over data elsewhere (a GPU)
  // picks exactly the same entries. The others throw InvalidArgument.
  virtual void draw_positions(std::size_t count, std::size_t k, const CompressContext& context,
                              std::span<std::uint32_t> out) const;
};

struct CompressorConfig {
  std::string name = "topk";
  double r_factor = 4.0;      // rtopk: r = ceil(r_factor * k)
  std::uint64_t seed = 0;     // randk, randk-unbiased, rtopk
  bool shared_seed = false;   // randk, randk-unbiased: the same indices on every worker
  // topk-reuse: the exact top-k (and a new threshold) in iterations that are multiples of this,
  // one filter pass against the kept threshold in between (Ok-Topk's period is 32).
  std::uint64_t threshold_period = 32;
};

// Throws InvalidArgument for an unknown name or a bad option (r_factor < 1 or not finite,
// threshold_period 0).
std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config);

// The names make_compressor accepts.
const std::vector<std::string>& compressor_names();

}  // namespace sparsgd::compress
