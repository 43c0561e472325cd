// topk-reuse, Ok-Topk's local selection (Li and Hoefler, PPoPP 2022): the exact top-k every
// `period` iterations, whose k-th magnitude is kept as a threshold; the iterations between select
// with one filter pass against it.

#include <algorithm>
#include <optional>

#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/threshold.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::compress {

const CompressorDescriptor& topk_reuse_compressor();

namespace {

// Where the filter pass misses the threshold compressors' count guarantee ([ceil(0.8k),
// floor(1.25k)]: the accumulator's scale moved), the exact top-k runs instead and sets a new
// threshold. The period counts iterations (CompressContext::iteration), so all workers recompute
// in the same ones; a fresh compressor (a resumed run) starts with an exact one.
class ReusedThresholdCompressor final : public DescribedCompressor<topk_reuse_compressor> {
 public:
  explicit ReusedThresholdCompressor(const CompressorConfig& config) : threshold_(config.threshold_period) {}

  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    validate_k(acc.size(), k);
    if (!threshold_.exact_due(context.iteration, acc.size(), k)) {
      const std::size_t max_count = select::threshold_max_count(k);
      out.dim = acc.size();
      out.resize(max_count + select::filter_padding());
      const select::FilterCounts counts =
          select::filter_greater(acc, threshold_.pivot(), out.indices.data(), out.values.data(), max_count);
      if (counts.max_key >= select::kNonFiniteKey) select::check_finite(acc, "input to topk-reuse");
      if (counts.greater >= select::threshold_min_count(k) && counts.greater <= max_count) {
        out.resize(counts.greater);
        return;
      }
    }
    select::topk(acc, k, out, workspace_);
    std::optional<std::uint32_t> kth;
    for (const float v : out.values) kth = std::min(kth.value_or(select::kNonFiniteKey), select::magnitude_key(v));
    threshold_.keep(kth, acc.size(), k);
  }

 private:
  select::ReusedThreshold threshold_;
  select::TopkWorkspace workspace_;
};
}  // namespace

const CompressorDescriptor& topk_reuse_compressor() {
  static const CompressorDescriptor descriptor{.name = "topk-reuse",
                                               .summary = "Ok-Topk's: the exact top-k every --threshold-period "
                                                          "iterations, one filter pass against its k-th magnitude "
                                                          "between (about k)",
                                               .properties = {.exact_count = false},
                                               .make = construct<ReusedThresholdCompressor>};
  return descriptor;
}

}  // namespace sparsgd::compress
