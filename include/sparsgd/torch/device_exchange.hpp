#pragma once
// One worker's exchange step for a gradient on a device (a GPU, or the CPU through the same code):
// collectives::GradientExchange's step, with the data kept where it lives. Error feedback (the
// residual holds acc between selection and commit, as there), the selection
// (torch/device_selection.hpp), the residual update from exactly what the aggregation consumed and
// the aggregated result all stay on the device. What crosses to the host is what the exchange
// itself sends: the selected pairs (k of n) go to the host aggregator, and the aggregated pairs and
// one consumed flag per selected entry come back. A dense exchange (the none compressor) carries all
// n, as it would on any host transport.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <torch/types.h>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/torch/device_selection.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

struct DeviceAggregation {
  std::string_view method;  // the aggregator's name, or the one auto chose
  bool dense = false;
  torch::Tensor indices;    // sparse: int64, ascending, on the device
  torch::Tensor values;     // sparse: float32, the SUM over workers at those indices
  torch::Tensor dense_sum;  // dense: n floats, the SUM over workers
};

class DeviceGradientExchange {
 public:
  // Throws where GradientExchange's constructor does.
  DeviceGradientExchange(transport::Transport& transport, std::size_t n, const collectives::ExchangeConfig& config,
                         const torch::Device& device);

  // Collective. gradient: n float32 values, contiguous, on the device. Returns the SUM over the
  // workers, valid until the next call. On a failure nothing is consumed: acc stays in the residual.
  const DeviceAggregation& exchange(const torch::Tensor& gradient, std::uint64_t iteration);

  std::size_t n() const { return n_; }
  std::size_t k() const { return k_; }
  void set_density(double density);
  const torch::Device& device() const { return device_; }
  // The last selection, and which of its entries the aggregation consumed (bool, on the device).
  const DeviceSelection& last_selection() const { return selection_; }
  const torch::Tensor& last_consumed() const { return consumed_; }
  const collectives::ExchangeTimes& last_times() const { return times_; }
  const collectives::Aggregator& aggregator() const { return *aggregator_; }
  // The residual (n floats on the device; a live view: copy it to keep it).
  const torch::Tensor& residual() const { return residual_; }
  // Throws InvalidArgument unless it holds n values.
  void set_residual(const torch::Tensor& residual);

 private:
  transport::Transport& transport_;
  std::size_t n_;
  torch::Device device_;
  std::unique_ptr<DeviceCompressor> compressor_;
  std::unique_ptr<collectives::Aggregator> aggregator_;
  bool error_feedback_;
  std::size_t k_;
  torch::Tensor residual_;
  DeviceSelection selection_;
  torch::Tensor consumed_;
  SparseVector host_selection_;
  collectives::Aggregation host_result_;
  DeviceAggregation result_;
  collectives::ExchangeTimes times_;
};

}  // namespace sparsgd::torch_layer
