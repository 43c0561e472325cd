#include "compress/compressors.hpp"

#include <algorithm>
#include <numeric>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/randk.hpp"
#include "sparsgd/select/rtopk.hpp"
#include "sparsgd/select/threshold.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::compress {
namespace {

// Stream tags keep the random draws of different purposes independent for the same seed.
constexpr std::uint64_t kRandkStream = 0x72616e646bULL;
constexpr std::uint64_t kRtopkStream = 0x72746f706bULL;

class TopkCompressor final : public Compressor {
 public:
  std::string name() const override { return "topk"; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    select::topk(acc, k, out, workspace_);
  }

 private:
  select::TopkWorkspace workspace_;
};

// randk, and its unbiased form: the same indices, values times n/k, so that the sent vector's
// expectation over the draw is acc itself (meant to run without error feedback).
class RandkCompressor final : public Compressor {
 public:
  RandkCompressor(std::uint64_t seed, bool shared, bool unbiased) : seed_(seed), shared_(shared), unbiased_(unbiased) {}
  std::string name() const override { return unbiased_ ? "randk-unbiased" : "randk"; }
  bool shared_indices() const override { return shared_; }
  double value_scale(std::size_t n, std::size_t k) const override {
    return unbiased_ ? static_cast<double>(n) / static_cast<double>(k) : 1.0;
  }
  bool scales_values() const override { return unbiased_; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    validate_k(acc.size(), k);
    select::check_finite(acc, "input to randk");
    // Shared mode leaves the rank out of the seed, so every worker draws the same indices.
    const std::uint64_t stream = shared_ ? 0 : static_cast<std::uint64_t>(context.rank) + 1;
    const std::uint64_t seed = mix_seed(mix_seed(seed_, kRandkStream, stream), context.iteration);
    out.dim = acc.size();
    out.resize(k);
    select::random_k_indices(acc.size(), k, seed, out.indices, bitmap_);
    const auto scale = static_cast<float>(value_scale(acc.size(), k));
    for (std::size_t i = 0; i < k; ++i) out.values[i] = scale * acc[out.indices[i]];
  }

 private:
  std::uint64_t seed_;
  bool shared_;
  bool unbiased_;
  std::vector<std::uint64_t> bitmap_;
};

// Ok-Topk's local selection (Li and Hoefler, PPoPP 2022): the exact top-k every `period`
// iterations, whose k-th magnitude is kept as a threshold; the iterations between select with one
// filter pass against it. Where that pass misses the threshold compressors' count guarantee
// ([ceil(0.8k), floor(1.25k)]: the accumulator's scale moved), the exact top-k runs instead and
// sets a new threshold. The period counts iterations (CompressContext::iteration), so all workers
// recompute in the same ones; a fresh compressor (a resumed run) starts with an exact one.
class ReusedThresholdCompressor final : public Compressor {
 public:
  explicit ReusedThresholdCompressor(std::uint64_t period) : period_(period) {}
  std::string name() const override { return "topk-reuse"; }
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

class RtopkCompressor final : public Compressor {
 public:
  RtopkCompressor(double r_factor, std::uint64_t seed) : r_factor_(r_factor), seed_(seed) {}
  std::string name() const override { return "rtopk"; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext& context,
                SparseVector& out) override {
    const std::uint64_t seed =
        mix_seed(mix_seed(seed_, kRtopkStream, static_cast<std::uint64_t>(context.rank) + 1), context.iteration);
    select::rtopk(acc, k, r_factor_, seed, out, workspace_);
  }

 private:
  double r_factor_;
  std::uint64_t seed_;
  select::RtopkWorkspace workspace_;
};

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

class DenseCompressor final : public Compressor {
 public:
  std::string name() const override { return "none"; }
  bool dense() const override { return true; }
  void compress(std::span<const float> acc, std::size_t k, const CompressContext&, SparseVector& out) override {
    validate_k(acc.size(), k);
    select::check_finite(acc, "input to the dense compressor");
    out.dim = acc.size();
    out.resize(acc.size());
    std::iota(out.indices.begin(), out.indices.end(), std::uint32_t{0});
    std::copy(acc.begin(), acc.end(), out.values.begin());
  }
};

}  // namespace

std::unique_ptr<Compressor> make_topk_compressor() { return std::make_unique<TopkCompressor>(); }
std::unique_ptr<Compressor> make_reused_threshold_compressor(std::uint64_t period) {
  return std::make_unique<ReusedThresholdCompressor>(period);
}
std::unique_ptr<Compressor> make_randk_compressor(std::uint64_t seed, bool shared_seed, bool unbiased) {
  return std::make_unique<RandkCompressor>(seed, shared_seed, unbiased);
}
std::unique_ptr<Compressor> make_rtopk_compressor(double r_factor, std::uint64_t seed) {
  return std::make_unique<RtopkCompressor>(r_factor, seed);
}
std::unique_ptr<Compressor> make_gaussiank_compressor() {
  return std::make_unique<ThresholdCompressor>("gaussiank", select::ThresholdEstimator::gaussian);
}
std::unique_ptr<Compressor> make_dgc_compressor() {
  return std::make_unique<ThresholdCompressor>("dgc", select::ThresholdEstimator::sampled);
}
std::unique_ptr<Compressor> make_dense_compressor() { return std::make_unique<DenseCompressor>(); }

}  // namespace sparsgd::compress
