// randk, and its unbiased form: the same indices, values times n/k, so that the sent vector's
// expectation over the draw is acc itself (meant to run without error feedback).

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/randk.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& randk_compressor();
const CompressorDescriptor& randk_unbiased_compressor();

namespace {

// Stream tags keep the random draws of different purposes independent for the same seed.
constexpr std::uint64_t kRandkStream = 0x72616e646bULL;

template <const CompressorDescriptor& (*Describe)(), bool kUnbiased>
class RandkCompressor final : public DescribedCompressor<Describe> {
 public:
  explicit RandkCompressor(const CompressorConfig& config) : seed_(config.seed), shared_(config.shared_seed) {}
  bool shared_indices() const override { return shared_; }
  double value_scale(std::size_t n, std::size_t k) const override {
    return kUnbiased ? static_cast<double>(n) / static_cast<double>(k) : 1.0;
  }
  bool scales_values() const override { return kUnbiased; }
  void draw_positions(std::size_t n, std::size_t k, const CompressContext& context,
                      std::span<std::uint32_t> out) const override {
    // Shared mode leaves the rank out of the seed, so every worker draws the same indices.
    const std::uint64_t stream = shared_ ? 0 : static_cast<std::uint64_t>(context.rank) + 1;
    const std::uint64_t seed = mix_seed(mix_seed(seed_, kRandkStream, stream), context.iteration);
    select::random_k_indices(n, k, seed, out, bitmap_);
  }

  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    validate_k(acc.size(), k);
    select::check_finite(acc, "input to randk");
    out.dim = acc.size();
    out.resize(k);
    draw_positions(acc.size(), k, context, out.indices);
    const auto scale = static_cast<float>(value_scale(acc.size(), k));
    for (std::size_t i = 0; i < k; ++i) out.values[i] = scale * acc[out.indices[i]];
  }

 private:
  std::uint64_t seed_;
  bool shared_;
  mutable std::vector<std::uint64_t> bitmap_;  // scratch of the draw, kept between calls
};

}  // namespace

const CompressorDescriptor& randk_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "randk", .summary = "k uniformly random indices drawn from (seed, iteration, rank); the same on every "
                                  "worker with a shared seed",
      .properties = {.draws_indices = true}, .make = construct<RandkCompressor<randk_compressor, false>>};
  return descriptor;
}

const CompressorDescriptor& randk_unbiased_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "randk-unbiased", .summary = "randk's indices, values times n/k (unbiased; needs error feedback off)",
      .properties = {.draws_indices = true, .scales_values = true},
      .make = construct<RandkCompressor<randk_unbiased_compressor, true>>};
  return descriptor;
}

}  // namespace sparsgd::compress
