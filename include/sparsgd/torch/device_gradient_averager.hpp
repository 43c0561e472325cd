#pragma once
// GradientAverager (torch/gradient_averager.hpp) for a buffer on a device: the same options, checks,
// statistics and results, with error feedback, the momentum-correction velocity, the selection and
// the average kept on the buffer's device (torch/device_exchange.hpp). It runs on CPU tensors too,
// through the same code, which is how the tests hold it to the host path.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/torch/device_exchange.hpp"
#include "sparsgd/torch/gradient_averager.hpp"

namespace sparsgd::torch_layer {

class DeviceGradientAverager {
 public:
  // As GradientAverager's constructor, with the device the buffers live on.
  DeviceGradientAverager(transport::Transport& transport, Segments segments, std::vector<std::string> names,
                         const collectives::ExchangeConfig& exchange, bool per_segment, bool skip_nonfinite,
                         double momentum_correction, const torch::Device& device);

  // As GradientAverager's: one scalar comes to the host unless the gradient holds NaN or Inf.
  StepStats check_finite(const torch::Tensor& gradient, std::uint64_t iteration);
  // Collective. input: n float32 values on the device; average: n float32 values on the device,
  // not overlapping input, overwritten with the average over the workers.
  StepStats average(const torch::Tensor& input, torch::Tensor& average, std::uint64_t iteration);

  std::size_t size() const { return n_; }
  const torch::Device& device() const { return device_; }
  void set_density(double density);
  double momentum_correction() const { return momentum_; }
  std::size_t exchange_count() const { return exchanges_.size(); }
  const DeviceGradientExchange& exchange(std::size_t e) const { return *exchanges_[e]; }
  // One residual per exchange (copies, on the device).
  std::vector<torch::Tensor> residuals() const;
  // Throws InvalidArgument for another count or length.
  void set_residuals(const std::vector<torch::Tensor>& residuals);
  // n values (an empty tensor without momentum correction), a copy.
  torch::Tensor local_velocity() const;
  void set_local_velocity(const torch::Tensor& velocity);

 private:
  transport::Transport& transport_;
  Segments segments_;
  std::vector<std::string> names_;
  bool skip_nonfinite_;
  std::size_t n_ = 0;
  double momentum_;
  torch::Device device_;
  torch::Tensor velocity_;
  Segments exchange_ranges_;
  std::vector<std::unique_ptr<DeviceGradientExchange>> exchanges_;
};

}  // namespace sparsgd::torch_layer
