#pragma once
// One flat float buffer over all of a model's parameters: the compressors and aggregators work on
// a single span of n floats, while LibTorch keeps one tensor per layer. Copies are one memcpy per
// parameter; the layout (parameter order, [begin, end) ranges) is fixed at construction.

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace sparsgd::torch_layer {

class FlatParameters {
 public:
  // `parameters` are typically module.parameters(). Each must be a defined, contiguous float32
  // tensor, all on one device; anything else throws sparsgd::InvalidArgument naming the
  // parameter's position. The span forms below take gradients on the CPU; the tensor forms stay on
  // the parameters' device.
  // The tensors are held by handle, so gradients the module computes later are seen here.
  explicit FlatParameters(std::vector<torch::Tensor> parameters);

  // Total number of scalars over all parameters.
  std::size_t size() const { return size_; }

  // Writes the concatenation of every parameter's .grad() in parameter order; a parameter whose
  // gradient is undefined (it took no part in the loss) contributes zeros.
  void gather_gradients(std::span<float> out) const;
  // Overwrites every parameter's .grad() from `in`, defining the gradient where it is undefined.
  void scatter_gradients(std::span<const float> in);

  // The same for the parameter values (broadcast of initial parameters, checkpoints). Writes do
  // not record autograd history and keep the parameters leaves that require grad.
  void gather_values(std::span<float> out) const;
  void scatter_values(std::span<const float> in);

  // On the parameters' device: every .grad() concatenated (zeros where undefined), and back; the
  // values likewise.
  torch::Device device() const;
  torch::Tensor gradients() const;
  void set_gradients(const torch::Tensor& flat);
  torch::Tensor values() const;
  void set_values(const torch::Tensor& flat);

  // [begin, end) of each parameter in the flat buffer, in parameter order.
  const std::vector<std::pair<std::size_t, std::size_t>>& layer_ranges() const { return ranges_; }

 private:
  // One flat float32 tensor on the parameters' device (empty for no parts).
  torch::Tensor concatenated(const std::vector<torch::Tensor>& parts) const;
  std::vector<torch::Tensor> parameters_;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;
  std::size_t size_ = 0;
};

}  // namespace sparsgd::torch_layer
