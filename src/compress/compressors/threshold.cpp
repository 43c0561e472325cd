// gaussiank and dgc: one filter pass at an estimated magnitude threshold, corrected a few times to
// land near k (select/threshold.hpp); they differ in how the threshold is estimated.

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/select/threshold.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& gaussiank_compressor();
const CompressorDescriptor& dgc_compressor();

namespace {

constexpr select::ThresholdEstimator kGaussian = select::ThresholdEstimator::gaussian;
constexpr select::ThresholdEstimator kSampled = select::ThresholdEstimator::sampled;

template <const CompressorDescriptor& (*Describe)(), select::ThresholdEstimator estimator>
class ThresholdCompressor final : public DescribedCompressor<Describe> {
 public:
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    select::threshold_select(acc, k, estimator, out, workspace_);
  }

 private:
  select::ThresholdWorkspace workspace_;
};

}  // namespace

const CompressorDescriptor& gaussiank_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "gaussiank", .summary = "one filter pass at the Gaussian inverse CDF of 1 - density from the mean and std (about k)",
      .properties = {.exact_count = false}, .make = construct<ThresholdCompressor<gaussiank_compressor, kGaussian>>};
  return descriptor;
}

const CompressorDescriptor& dgc_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "dgc", .summary = "one filter pass at the top-k threshold of a strided sample (DGC; about k)",
      .properties = {.exact_count = false}, .make = construct<ThresholdCompressor<dgc_compressor, kSampled>>};
  return descriptor;
}

}  // namespace sparsgd::compress
