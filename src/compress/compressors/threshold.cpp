// gaussiank and dgc: one filter pass at an estimated magnitude threshold, corrected a few times to
// land near k (select/threshold.hpp); they differ in how the threshold is estimated.

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/select/threshold.hpp"

namespace sparsgd::compress {
namespace {

class ThresholdCompressor final : public Compressor {
 public:
  ThresholdCompressor(std::string name, select::ThresholdEstimator estimator)
      : name_(std::move(name)), estimator_(estimator) {}
  std::string name() const override { return name_; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    select::threshold_select(acc, k, estimator_, out, workspace_);
  }

 private:
  std::string name_;
  select::ThresholdEstimator estimator_;
  select::ThresholdWorkspace workspace_;
};

}  // namespace

const CompressorDescriptor& gaussiank_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "gaussiank",
      .summary = "one filter pass at the Gaussian inverse CDF of 1 - density from the mean and std (about k)",
      .properties = {.exact_count = false},
      .make = [](const CompressorConfig&) -> std::unique_ptr<Compressor> {
        return std::make_unique<ThresholdCompressor>("gaussiank", select::ThresholdEstimator::gaussian);
      },
  };
  return descriptor;
}

const CompressorDescriptor& dgc_compressor() {
  static const CompressorDescriptor descriptor{
      .name = "dgc",
      .summary = "one filter pass at the top-k threshold of a strided sample (DGC; about k)",
      .properties = {.exact_count = false},
      .make = [](const CompressorConfig&) -> std::unique_ptr<Compressor> {
        return std::make_unique<ThresholdCompressor>("dgc", select::ThresholdEstimator::sampled);
      },
  };
  return descriptor;
}

}  // namespace sparsgd::compress
