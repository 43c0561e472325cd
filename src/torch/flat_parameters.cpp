#include "sparsgd/torch/flat_parameters.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {
namespace {

std::string describe(std::size_t i, std::size_t count, const torch::Tensor& t) {
  std::ostringstream os;
  os << "parameter " << i << " of " << count;
  if (t.defined()) os << " (shape " << t.sizes() << ")";
  return os.str();
}

// A flat slice viewed as a tensor of the parameter's shape, for the copies that cannot be a
// memcpy. from_blob neither owns nor copies; nothing writes through the const_cast on reads.
torch::Tensor view_of(const float* data, const torch::Tensor& like) {
  return torch::from_blob(const_cast<float*>(data), like.sizes(), torch::TensorOptions().dtype(torch::kFloat32));
}

bool is_plain_float_cpu(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat32 && t.device().is_cpu() && t.is_contiguous();
}

// Gradients are produced by LibTorch, not checked at construction, so each use checks them.
void check_gradient(std::size_t i, std::size_t count, const torch::Tensor& p, const torch::Tensor& g) {
  SPARSGD_ENFORCE_EQ(g.numel(), p.numel(), "the gradient of " << describe(i, count, p) << " has a different size");
  SPARSGD_ENFORCE(g.scalar_type() == torch::kFloat32 && g.device().is_cpu(),
                  "the gradient of " << describe(i, count, p) << " must be a float32 CPU tensor, got "
                                     << g.scalar_type() << " on " << g.device());
}

}  // namespace

FlatParameters::FlatParameters(std::vector<torch::Tensor> parameters) : parameters_(std::move(parameters)) {
  ranges_.reserve(parameters_.size());
  const std::size_t count = parameters_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const auto& p = parameters_[i];
    SPARSGD_ENFORCE(p.defined(), describe(i, count, p) << " is an undefined tensor");
    SPARSGD_ENFORCE(p.scalar_type() == torch::kFloat32,
                    describe(i, count, p) << " must be float32, got " << p.scalar_type());
    SPARSGD_ENFORCE(p.device() == parameters_.front().device(),
                    describe(i, count, p) << " is on " << p.device() << ", the first on " << parameters_.front().device()
                                          << ": one device for all");
    // The flat copies are one memcpy per parameter, which needs the plain row-major layout.
    SPARSGD_ENFORCE(p.is_contiguous(), describe(i, count, p) << " must be contiguous");
    const auto n = static_cast<std::size_t>(p.numel());
    ranges_.emplace_back(size_, size_ + n);
    size_ += n;
  }
}

void FlatParameters::gather_gradients(std::span<float> out) const {
  SPARSGD_ENFORCE_EQ(out.size(), size_, "gather_gradients: the output must hold every parameter");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto& p = parameters_[i];
    const auto [begin, end] = ranges_[i];
    const auto& g = p.grad();
    if (!g.defined()) {
      // The parameter took no part in the loss: its gradient is zero, not missing.
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(begin), out.begin() + static_cast<std::ptrdiff_t>(end), 0.0f);
      continue;
    }
    check_gradient(i, parameters_.size(), p, g);
    if (g.is_contiguous()) {
      std::memcpy(out.data() + begin, g.data_ptr<float>(), (end - begin) * sizeof(float));
    } else {
      view_of(out.data() + begin, p).copy_(g.reshape(p.sizes()));
    }
  }
}

void FlatParameters::scatter_gradients(std::span<const float> in) {
  SPARSGD_ENFORCE_EQ(in.size(), size_, "scatter_gradients: the input must cover every parameter");
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    const auto [begin, end] = ranges_[i];
    auto& g = p.mutable_grad();
    if (!g.defined()) g = torch::empty_like(p, torch::MemoryFormat::Contiguous);
    check_gradient(i, parameters_.size(), p, g);
    if (is_plain_float_cpu(g)) {
      std::memcpy(g.data_ptr<float>(), in.data() + begin, (end - begin) * sizeof(float));
    } else {
      g.copy_(view_of(in.data() + begin, g));
    }
  }
}

void FlatParameters::gather_values(std::span<float> out) const {
  SPARSGD_ENFORCE_EQ(out.size(), size_, "gather_values: the output must hold every parameter");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto [begin, end] = ranges_[i];
    if (parameters_[i].device().is_cpu()) {
      std::memcpy(out.data() + begin, parameters_[i].data_ptr<float>(), (end - begin) * sizeof(float));
    } else {
      view_of(out.data() + begin, parameters_[i]).copy_(parameters_[i]);
    }
  }
}

torch::Device FlatParameters::device() const {
  return parameters_.empty() ? torch::Device(torch::kCPU) : parameters_.front().device();
}

torch::Tensor FlatParameters::concatenated(const std::vector<torch::Tensor>& parts) const {
  return parts.empty() ? torch::empty({0}, torch::TensorOptions().dtype(torch::kFloat32).device(device()))
                       : torch::cat(parts);
}

torch::Tensor FlatParameters::gradients() const {
  std::vector<torch::Tensor> parts;
  parts.reserve(parameters_.size());
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto& p = parameters_[i];
    const auto& g = p.grad();
    if (!g.defined()) {
      // The parameter took no part in the loss: its gradient is zero, not missing.
      parts.push_back(torch::zeros({p.numel()}, p.options()));
      continue;
    }
    SPARSGD_ENFORCE_EQ(g.numel(), p.numel(), "the gradient of " << describe(i, parameters_.size(), p) << " has a different size");
    SPARSGD_ENFORCE(g.scalar_type() == torch::kFloat32 && g.device() == p.device(),
                    "the gradient of " << describe(i, parameters_.size(), p) << " must be float32 on " << p.device()
                                       << ", got " << g.scalar_type() << " on " << g.device());
    parts.push_back(g.reshape({-1}));
  }
  return concatenated(parts);
}

void FlatParameters::set_gradients(const torch::Tensor& flat) {
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(flat.numel()), size_, "set_gradients: the input must cover every parameter");
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    const auto [begin, end] = ranges_[i];
    auto& g = p.mutable_grad();
    const torch::Tensor part = flat.narrow(0, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end - begin));
    if (!g.defined()) g = torch::empty_like(p, torch::MemoryFormat::Contiguous);
    g.copy_(part.view(p.sizes()));
  }
}

torch::Tensor FlatParameters::values() const {
  std::vector<torch::Tensor> parts;
  parts.reserve(parameters_.size());
  for (const auto& p : parameters_) parts.push_back(p.detach().reshape({-1}));
  return concatenated(parts);
}

void FlatParameters::set_values(const torch::Tensor& flat) {
  SPARSGD_ENFORCE_EQ(static_cast<std::size_t>(flat.numel()), size_, "set_values: the input must cover every parameter");
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    const auto [begin, end] = ranges_[i];
    p.copy_(flat.narrow(0, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end - begin)).view(p.sizes()));
  }
}

void FlatParameters::scatter_values(std::span<const float> in) {
  SPARSGD_ENFORCE_EQ(in.size(), size_, "scatter_values: the input must cover every parameter");
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    // copy_ rather than a raw memcpy: it is a memcpy for this layout, and it also bumps the
    // version counter, so a graph that saved the old values fails loudly instead of silently
    // computing gradients from values that are gone.
    p.copy_(view_of(in.data() + ranges_[i].first, p));
  }
}

}  // namespace sparsgd::torch_layer
