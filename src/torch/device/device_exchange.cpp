#include "sparsgd/torch/device_exchange.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::torch_layer {

DeviceGradientExchange::DeviceGradientExchange(transport::Transport& transport, std::size_t n,
                                               const collectives::ExchangeConfig& config, const torch::Device& device)
    : transport_(transport),
      n_(n),
      device_(device),
      compressor_((collectives::validate(config), validate_length(n), make_device_compressor(config.compressor))),
      aggregator_(collectives::make_aggregator(config.aggregator,
                                               {config.index_coding, config.network, config.auto_trial_rounds})),
      error_feedback_(config.error_feedback),
      k_(k_from_density(n, config.density)),
      residual_(torch::zeros({static_cast<std::int64_t>(n)}, torch::TensorOptions().dtype(torch::kFloat32).device(device))) {}

void DeviceGradientExchange::set_density(double density) { k_ = k_from_density(n_, density); }

void DeviceGradientExchange::set_residual(const torch::Tensor& residual) {
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(residual.numel()), n_, "residual length differs");
  residual_.copy_(residual.detach().reshape({-1}));
}

namespace {

// The pairs as the host aggregators take them: uint32 indices, float values.
void to_host(const DeviceSelection& selection, std::size_t n, SparseVector& out) {
  const torch::Tensor indices = selection.indices.to(torch::kCPU).contiguous();
  const torch::Tensor values = selection.values.to(torch::kCPU).contiguous();
  out.dim = n;
  out.resize(static_cast<std::size_t>(indices.numel()));
  if (out.size() == 0) return;
  const std::int64_t* from = indices.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < out.size(); ++i) out.indices[i] = static_cast<std::uint32_t>(from[i]);
  std::memcpy(out.values.data(), values.data_ptr<float>(), out.size() * sizeof(float));
}

torch::Tensor floats_to(const std::vector<float>& values, const torch::Device& device) {
  return torch::from_blob(const_cast<float*>(values.data()), {static_cast<std::int64_t>(values.size())},
                          torch::kFloat32)
      .to(device, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

const DeviceAggregation& DeviceGradientExchange::exchange(const torch::Tensor& gradient, std::uint64_t iteration) {
  SPARSGD_ENFORCE(gradient.device() == device_ && gradient.scalar_type() == torch::kFloat32 &&
                      static_cast<std::size_t>(gradient.numel()) == n_,
                  "the gradient must be " << n_ << " float32 values on " << device_.str());
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const double cpu_start = transport::thread_cpu_seconds();
  // The residual holds acc until the commit below; without error feedback acc is the gradient.
  const torch::Tensor flat = gradient.reshape({-1});
  if (error_feedback_) {
    residual_.add_(flat);
  } else {
    residual_.copy_(flat);
  }
  // A failure anywhere below consumes nothing: acc stays in the residual, as on the host.
  selection_ = compressor_->select(residual_, k_, {iteration, transport_.rank()});
  to_host(selection_, n_, host_selection_);
  const auto selected = clock::now();
  const double cpu_selected = transport::thread_cpu_seconds();
  times_.aggregate_clock_start = transport_.clock_seconds();
  aggregator_->aggregate(transport_, host_selection_, k_, host_result_);
  times_.aggregate_clock_end = transport_.clock_seconds();
  const auto done = clock::now();
  const double cpu_commit = transport::thread_cpu_seconds();
  consumed_ = torch::from_blob(host_result_.consumed.data(), {static_cast<std::int64_t>(host_result_.consumed.size())},
                               torch::kUInt8)
                  .to(device_, torch::kBool);
  residual_.index_fill_(0, selection_.indices.masked_select(consumed_), 0.0f);
  result_.method = host_result_.method;
  result_.dense = host_result_.dense;
  if (host_result_.dense) {
    result_.dense_sum = floats_to(host_result_.dense_sum, device_);
  } else {
    const SparseVector& sum = host_result_.sum;
    std::vector<std::int64_t> indices(sum.indices.begin(), sum.indices.end());
    result_.indices = torch::from_blob(indices.data(), {static_cast<std::int64_t>(indices.size())}, torch::kInt64)
                          .to(device_, /*non_blocking=*/false, /*copy=*/true);
    result_.values = floats_to(sum.values, device_);
  }
  times_.compress_seconds = std::chrono::duration<double>(selected - start).count();
  times_.compress_cpu_seconds = cpu_selected - cpu_start;
  times_.aggregate_seconds = std::chrono::duration<double>(done - selected).count();
  times_.aggregate_cpu_seconds = cpu_commit - cpu_selected;
  times_.feedback_cpu_seconds = transport::thread_cpu_seconds() - cpu_commit;
  return result_;
}

}  // namespace sparsgd::torch_layer
