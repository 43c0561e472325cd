// rtopk (Barnes et al., JSAIT 2020): the top r = ceil(r_factor * k) by magnitude, then a uniform
// k of them (select/rtopk.hpp).

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/select/randk.hpp"
#include "sparsgd/select/rtopk.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& rtopk_compressor();

namespace {

// Stream tags keep the random draws of different purposes independent for the same seed.
constexpr std::uint64_t kRtopkStream = 0x72746f706bULL;

class RtopkCompressor final : public DescribedCompressor<rtopk_compressor> {
 public:
  explicit RtopkCompressor(const CompressorConfig& config) : r_factor_(config.r_factor), seed_(config.seed) {
    select::rtopk_r(1, 1, r_factor_);  // validates r_factor up front
  }
  void draw_positions(std::size_t r, std::size_t k, const CompressContext& context,
                      std::span<std::uint32_t> out) const override {
    select::random_k_indices(r, k, seed_for(context), out, bitmap_);
  }

  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    select::rtopk(acc, k, r_factor_, seed_for(context), out, workspace_);
  }

 private:
  double r_factor_;
  std::uint64_t seed_;
  select::RtopkWorkspace workspace_;
  mutable std::vector<std::uint64_t> bitmap_;  // scratch of draw_positions

  std::uint64_t seed_for(const CompressContext& context) const {
    return mix_seed(mix_seed(seed_, kRtopkStream, static_cast<std::uint64_t>(context.rank) + 1), context.iteration);
  }
};

}  // namespace

const CompressorDescriptor& rtopk_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "rtopk", .summary = "the top r = ceil(r_factor * k) by magnitude, then a uniformly random k of them (rTop-k)",
      .properties = {.uses_r_factor = true}, .make = construct<RtopkCompressor>};
  return descriptor;
}

}  // namespace sparsgd::compress
