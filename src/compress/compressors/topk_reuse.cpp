// topk-reuse, Ok-Topk's local selection (Li and Hoefler, PPoPP 2022): the exact top-k every
// `period` iterations, whose k-th magnitude is kept as a threshold; the iterations between select
// with one filter pass against it.

#include <algorithm>

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
  explicit ReusedThresholdCompressor(const CompressorConfig& config) : period_(config.threshold_period) {
    if (period_ == 0) throw InvalidArgument("the threshold period of topk-reuse must be at least 1");
  }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    validate_k(acc.size(), k);
    const bool due = !has_pivot_ || context.iteration % period_ == 0 || acc.size() != dim_ || k != k_;
    if (!due) {
      const std::size_t max_count = select::threshold_max_count(k);
      out.dim = acc.size();
      out.resize(max_count + select::filter_padding());
      const select::FilterCounts counts =
          select::filter_greater(acc, pivot_, out.indices.data(), out.values.data(), max_count);
      if (counts.max_key >= select::kNonFiniteKey) select::check_finite(acc, "input to topk-reuse");
      if (counts.greater >= select::threshold_min_count(k) && counts.greater <= max_count) {
        out.resize(counts.greater);
        return;
      }
    }
    select::topk(acc, k, out, workspace_);
    has_pivot_ = out.size() > 0;
    if (!has_pivot_) return;
    std::uint32_t kth = select::magnitude_key(out.values[0]);
    for (const float v : out.values) kth = std::min(kth, select::magnitude_key(v));
    // The filter keeps keys above the pivot: the k-th magnitude and everything larger.
    pivot_ = kth > 0 ? kth - 1 : 0;
    dim_ = acc.size();
    k_ = k;
  }

 private:
  std::uint64_t period_;
  bool has_pivot_ = false;
  std::uint32_t pivot_ = 0;
  std::size_t dim_ = 0, k_ = 0;
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
