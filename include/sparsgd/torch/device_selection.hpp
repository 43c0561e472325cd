#pragma once
// The compressors' selections over a tensor wherever it lives (a GPU, or the CPU), entry for entry
// the ones the host compressors (compress/compressor.hpp) make from the same values: the device
// path of docs/DESIGN.md's device rules. The data and every pass over it stay on the tensor's
// device; a few scalars a pass (a count, a pivot, the largest magnitude) come to the host, where
// the same pivot search as the host's runs (select/threshold.hpp); the random compressors' k
// positions are drawn on the host by the host compressor itself and go to the device.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/compress/compressor.hpp"

namespace sparsgd::torch_layer {

struct DeviceSelection {
  torch::Tensor indices;  // int64, ascending, on acc's device
  torch::Tensor values;   // float32: acc at those indices, times the compressor's value scale
};

class DeviceCompressor {
 public:
  explicit DeviceCompressor(const compress::CompressorConfig& config);
  virtual ~DeviceCompressor() = default;
  const compress::Compressor& host() const { return *host_; }
  // acc: float32, one dimension, contiguous, on any device. Selects what host().compress() selects
  // from the same values (the same count, indices and values). Throws as it does: InvalidArgument on
  // a bad k, InvalidData on NaN or Inf.
  virtual DeviceSelection select(const torch::Tensor& acc, std::size_t k, const compress::CompressContext& context) = 0;

 protected:
  std::unique_ptr<compress::Compressor> host_;
};

// The device twin of the registered compressor `config.name`. Throws InvalidArgument for a name
// the registry does not know, or one without a twin (a test checks that every one has).
std::unique_ptr<DeviceCompressor> make_device_compressor(const compress::CompressorConfig& config);

namespace device_ops {
// The passes the selections are built from; exposed for tests and the benchmark.

// Magnitude keys (select/magnitude.hpp) of a float32 tensor: its bits with the sign cleared, int32.
torch::Tensor magnitude_keys(const torch::Tensor& x);
// Throws InvalidData naming the first NaN or Inf of x as select::check_finite does, given its keys.
// Returns the largest key (0 for no keys), which the pass found anyway.
std::uint32_t check_finite(const torch::Tensor& x, const torch::Tensor& keys, const char* what);
// The k-th largest of the keys (1 <= k <= n), a 0-dimensional int32 tensor on their device: on a
// GPU the radix select of cuda/kth_largest_key.hpp (three read passes), elsewhere torch's topk.
torch::Tensor kth_largest_key(const torch::Tensor& keys, std::size_t k);
// Exact top-k by magnitude, ties to the lower index: ascending int64 indices (select::topk's).
torch::Tensor exact_topk_indices(const torch::Tensor& keys, std::size_t k);
}  // namespace device_ops

}  // namespace sparsgd::torch_layer
