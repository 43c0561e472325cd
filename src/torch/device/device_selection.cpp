#include "sparsgd/torch/device_selection.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/rtopk.hpp"
#include "sparsgd/select/threshold.hpp"
#ifdef SPARSGD_HAVE_CUDA
#include "sparsgd/cuda/kth_largest_key.hpp"
#endif

namespace sparsgd::torch_layer {

namespace device_ops {

torch::Tensor magnitude_keys(const torch::Tensor& x) {
  return x.view(torch::kInt32).bitwise_and(0x7FFFFFFF);
}

std::uint32_t check_finite(const torch::Tensor& x, const torch::Tensor& keys, const char* what) {
  if (keys.numel() == 0) return 0;
  const auto max_key = keys.max().item<std::int32_t>();
  if (max_key < static_cast<std::int32_t>(select::kNonFiniteKey)) return static_cast<std::uint32_t>(max_key);
  const auto first = keys.ge(static_cast<std::int32_t>(select::kNonFiniteKey)).nonzero()[0][0].item<std::int64_t>();
  throw InvalidData(std::string(what) + " holds a non-finite value (" + std::to_string(x[first].item<float>()) +
                    ") at index " + std::to_string(first));
}

torch::Tensor kth_largest_key(const torch::Tensor& keys, std::size_t k) {
#ifdef SPARSGD_HAVE_CUDA
  if (keys.is_cuda() && keys.is_contiguous()) {
    // Three histogram passes on the device (cuda/kth_largest_key.hpp), on torch's current stream.
    const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(keys.device());
    const cuda::KthKey found = cuda::kth_largest_key(reinterpret_cast<const float*>(keys.data_ptr<std::int32_t>()),
                                                     static_cast<std::size_t>(keys.numel()), k, stream.native_handle());
    return torch::full({}, static_cast<std::int32_t>(found.key), keys.options());
  }
#endif
  return std::get<0>(keys.topk(static_cast<std::int64_t>(k), 0, true, false)).min();
}

torch::Tensor exact_topk_indices(const torch::Tensor& keys, std::size_t k) {
  const auto n = static_cast<std::size_t>(keys.numel());
  validate_k(n, k);
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(keys.device());
  if (k == n) return torch::arange(static_cast<std::int64_t>(n), options);
  // The k-th largest key is one value however ties fall; every key above it is in, and the first
  // of the keys equal to it fill up to k (the lower indices win, as in select::topk).
  const torch::Tensor kth = kth_largest_key(keys, k);
  const torch::Tensor above = keys.gt(kth).nonzero().squeeze(1);
  const std::int64_t ties = static_cast<std::int64_t>(k) - above.numel();
  const torch::Tensor at = keys.eq(kth).nonzero().squeeze(1).narrow(0, 0, ties);
  return std::get<0>(torch::cat({above, at}).sort());
}

}  // namespace device_ops

DeviceCompressor::DeviceCompressor(const compress::CompressorConfig& config)
    : host_(compress::make_compressor(config)) {}

namespace {

using device_ops::check_finite;
using device_ops::exact_topk_indices;
using device_ops::magnitude_keys;

constexpr auto kNonFinite = static_cast<std::int32_t>(select::kNonFiniteKey);

void check_input(const torch::Tensor& acc) {
  SPARSGD_ENFORCE(acc.dim() == 1 && acc.scalar_type() == torch::kFloat32 && acc.is_contiguous(),
                  "a device selection takes a contiguous one-dimensional float32 tensor");
}

DeviceSelection gather(const torch::Tensor& acc, torch::Tensor indices, float scale = 1.0f) {
  torch::Tensor values = acc.index_select(0, indices);
  if (scale != 1.0f) values.mul_(scale);
  return {std::move(indices), std::move(values)};
}

torch::Tensor positions_tensor(const std::vector<std::uint32_t>& positions, const torch::Device& device) {
  return torch::tensor(std::vector<std::int64_t>(positions.begin(), positions.end()), torch::kInt64).to(device);
}

// Entries whose key is above the pivot: how many (one pass, one scalar to the host).
std::size_t count_above(const torch::Tensor& keys, std::uint32_t pivot) {
  return static_cast<std::size_t>(keys.gt(static_cast<std::int64_t>(pivot)).sum().item<std::int64_t>());
}

torch::Tensor indices_above(const torch::Tensor& keys, std::uint32_t pivot) {
  return keys.gt(static_cast<std::int64_t>(pivot)).nonzero().squeeze(1);
}

class DenseSelection final : public DeviceCompressor {
 public:
  using DeviceCompressor::DeviceCompressor;
  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext&) override {
    check_input(acc);
    validate_k(static_cast<std::size_t>(acc.numel()), k);
    check_finite(acc, magnitude_keys(acc), "input to the dense compressor");
    return {torch::arange(acc.numel(), acc.options().dtype(torch::kInt64)), acc.clone()};
  }
};

class TopkSelection final : public DeviceCompressor {
 public:
  using DeviceCompressor::DeviceCompressor;
  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext&) override {
    check_input(acc);
    validate_k(static_cast<std::size_t>(acc.numel()), k);
    const torch::Tensor keys = magnitude_keys(acc);
    check_finite(acc, keys, "input to top-k");
    return gather(acc, exact_topk_indices(keys, k));
  }
};

class RandkSelection final : public DeviceCompressor {
 public:
  using DeviceCompressor::DeviceCompressor;
  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext& context) override {
    check_input(acc);
    const auto n = static_cast<std::size_t>(acc.numel());
    validate_k(n, k);
    check_finite(acc, magnitude_keys(acc), "input to randk");
    std::vector<std::uint32_t> positions(k);
    host_->draw_positions(n, k, context, positions);
    return gather(acc, positions_tensor(positions, acc.device()), static_cast<float>(host_->value_scale(n, k)));
  }
};

class RtopkSelection final : public DeviceCompressor {
 public:
  RtopkSelection(const compress::CompressorConfig& config) : DeviceCompressor(config), r_factor_(config.r_factor) {}
  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext& context) override {
    check_input(acc);
    const auto n = static_cast<std::size_t>(acc.numel());
    const std::size_t r = select::rtopk_r(n, k, r_factor_);
    const torch::Tensor keys = magnitude_keys(acc);
    check_finite(acc, keys, "input to top-k");
    const torch::Tensor top_r = exact_topk_indices(keys, r);
    std::vector<std::uint32_t> positions(k);
    host_->draw_positions(r, k, context, positions);
    return gather(acc, top_r.index_select(0, positions_tensor(positions, acc.device())));
  }

 private:
  double r_factor_;
};

// gaussiank and dgc: the host's first pivot from the same statistics, then its corrected search
// over counts made here.
class ThresholdSelection final : public DeviceCompressor {
 public:
  ThresholdSelection(const compress::CompressorConfig& config, select::ThresholdEstimator estimator)
      : DeviceCompressor(config), estimator_(estimator) {}

  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext&) override {
    check_input(acc);
    const auto n = static_cast<std::size_t>(acc.numel());
    validate_k(n, k);
    if (n == 0) return gather(acc, torch::empty({0}, acc.options().dtype(torch::kInt64)));
    const torch::Tensor keys = magnitude_keys(acc);
    const std::uint32_t max_key = check_finite(acc, keys, "input to threshold selection");
    const std::uint32_t initial =
        estimator_ == select::ThresholdEstimator::gaussian ? gaussian_initial(acc, k) : sampled_initial(keys, k);
    int passes = 0;
    const auto pivot = select::search_pivot(
        n, k, initial, [&](std::uint32_t p) { return select::PivotCount{count_above(keys, p), max_key}; }, passes);
    return gather(acc, pivot ? indices_above(keys, *pivot) : exact_topk_indices(keys, k));
  }

 private:
  // select::moments' statistics, summed in double as it sums them (in chunks, so that the double
  // copy stays small), so that the first pivot is the host's.
  static std::uint32_t gaussian_initial(const torch::Tensor& acc, std::size_t k) {
    const auto n = static_cast<std::size_t>(acc.numel());
    const auto stride = static_cast<std::int64_t>(select::moments_shift_stride(n));
    const torch::Tensor sample = acc.slice(0, 0, acc.numel(), stride).cpu();
    const float shift = select::moments_shift({sample.data_ptr<float>(), static_cast<std::size_t>(sample.numel())});
    constexpr std::int64_t kChunk = std::int64_t{1} << 22;
    torch::Tensor sum = torch::zeros({}, acc.options().dtype(torch::kFloat64));
    torch::Tensor sum_sq = torch::zeros_like(sum);
    for (std::int64_t begin = 0; begin < acc.numel(); begin += kChunk) {
      const torch::Tensor centred =
          acc.slice(0, begin, std::min(acc.numel(), begin + kChunk)).to(torch::kFloat64).sub_(static_cast<double>(shift));
      sum += centred.sum();
      sum_sq += centred.square().sum();
    }
    return select::gaussian_pivot(select::moments_from_sums(shift, sum.item<double>(), sum_sq.item<double>(), n), n, k);
  }

  static std::uint32_t sampled_initial(const torch::Tensor& keys, std::size_t k) {
    const auto n = static_cast<std::size_t>(keys.numel());
    const select::SampleLayout layout = select::sample_layout(n, k);
    torch::Tensor sample = keys;
    if (!layout.whole) {
      const auto options = keys.options().dtype(torch::kInt64);
      const torch::Tensor starts =
          torch::arange(static_cast<std::int64_t>(layout.runs), options) * static_cast<std::int64_t>(layout.stride) +
          static_cast<std::int64_t>(layout.offset);
      torch::Tensor positions =
          (starts.unsqueeze(1) + torch::arange(static_cast<std::int64_t>(select::kSampleRunLength), options)).flatten();
      positions = positions.masked_select(positions.lt(static_cast<std::int64_t>(n)));
      sample = keys.index_select(0, positions);
    }
    const std::size_t rank = select::sample_pivot_rank(static_cast<std::size_t>(sample.numel()), n, k);
    if (rank >= static_cast<std::size_t>(sample.numel())) return 0;
    return static_cast<std::uint32_t>(
        std::get<0>(sample.topk(static_cast<std::int64_t>(rank) + 1, 0, true, false)).min().item<std::int32_t>());
  }

  select::ThresholdEstimator estimator_;
};

// topk-reuse: the host's schedule of exact selections and its kept pivot.
class ReusedThresholdSelection final : public DeviceCompressor {
 public:
  explicit ReusedThresholdSelection(const compress::CompressorConfig& config)
      : DeviceCompressor(config), threshold_(config.threshold_period) {}

  DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext& context) override {
    check_input(acc);
    const auto n = static_cast<std::size_t>(acc.numel());
    validate_k(n, k);
    const torch::Tensor keys = magnitude_keys(acc);
    check_finite(acc, keys, "input to topk-reuse");
    if (!threshold_.exact_due(context.iteration, n, k)) {
      const std::size_t count = count_above(keys, threshold_.pivot());
      if (count >= select::threshold_min_count(k) && count <= select::threshold_max_count(k)) {
        return gather(acc, indices_above(keys, threshold_.pivot()));
      }
    }
    torch::Tensor indices = exact_topk_indices(keys, k);
    std::optional<std::uint32_t> kth;
    if (k > 0) kth = static_cast<std::uint32_t>(keys.index_select(0, indices).min().item<std::int32_t>());
    threshold_.keep(kth, n, k);
    return gather(acc, std::move(indices));
  }

 private:
  select::ReusedThreshold threshold_;
};

using Factory = std::function<std::unique_ptr<DeviceCompressor>(const compress::CompressorConfig&)>;

template <typename T>
Factory twin() {
  return [](const compress::CompressorConfig& config) { return std::make_unique<T>(config); };
}

// One line a compressor, by its registered name (compress/registry.cpp).
const std::map<std::string, Factory>& twins() {
  static const std::map<std::string, Factory> table{
      {"none", twin<DenseSelection>()},
      {"topk", twin<TopkSelection>()},
      {"topk-reuse", twin<ReusedThresholdSelection>()},
      {"randk", twin<RandkSelection>()},
      {"randk-unbiased", twin<RandkSelection>()},
      {"rtopk", twin<RtopkSelection>()},
      {"gaussiank",
       [](const auto& c) { return std::make_unique<ThresholdSelection>(c, select::ThresholdEstimator::gaussian); }},
      {"dgc", [](const auto& c) { return std::make_unique<ThresholdSelection>(c, select::ThresholdEstimator::sampled); }},
  };
  return table;
}

}  // namespace

std::unique_ptr<DeviceCompressor> make_device_compressor(const compress::CompressorConfig& config) {
  const std::string name = compress::make_compressor(config)->name();  // validates; resolves an alias
  const auto found = twins().find(name);
  SPARSGD_ENFORCE(found != twins().end(), "the " << name << " compressor has no device selection yet");
  return found->second(config);
}

}  // namespace sparsgd::torch_layer
