// cuda::kth_largest_key against its CPU twin, select::kth_largest_key_radix, on the same inputs:
// sizes from 1 to past a grid's reach, k from 1 to n, all ties, both zeros, denormals. Skipped,
// naming why, where the process sees no CUDA device.

#include "sparsgd/cuda/kth_largest_key.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/cuda/device.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::cuda {
namespace {

class KthLargestKey : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "needs a CUDA device: " << unavailable_reason();
  }
};

KthKey on_device(const std::vector<float>& x, std::size_t k) {
  float* device = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), x.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  const KthKey found = kth_largest_key(device, x.size(), k);
  cudaFree(device);
  return found;
}

void expect_twins(const std::vector<float>& x, std::size_t k) {
  const select::KthKey cpu = select::kth_largest_key_radix(x, k);
  const KthKey gpu = on_device(x, k);
  EXPECT_EQ(gpu.key, cpu.key) << "n " << x.size() << " k " << k;
  EXPECT_EQ(gpu.greater, cpu.greater) << "n " << x.size() << " k " << k;
}

TEST_F(KthLargestKey, MatchesTheCpuRadixSelect) {
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{1000003}, std::size_t{5} << 20}) {
    std::vector<float> x(n);
    Rng rng(n + 3);
    for (auto& v : x) v = static_cast<float>(4.0 * rng.uniform() - 2.0);
    for (std::size_t k : {std::size_t{1}, n / 1000 + 1, n / 10 + 1, n}) expect_twins(x, std::min(k, n));
  }
}

TEST_F(KthLargestKey, TiesZerosAndDenormals) {
  std::vector<float> ties(100000, 0.5f);
  for (std::size_t i = 0; i < ties.size(); i += 3) ties[i] = -0.5f;
  for (std::size_t k : {std::size_t{1}, std::size_t{777}, ties.size()}) expect_twins(ties, k);
  std::vector<float> mixed = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -1e-40f, 3.0f, -3.0f, 1e30f, 0.0f};
  for (std::size_t k = 1; k <= mixed.size(); ++k) expect_twins(mixed, k);
}

// The arguments are checked before any CUDA call: this runs without a device too.
TEST(KthLargestKeyArguments, RefusesAKOutsideOneToN) {
  EXPECT_THROW(kth_largest_key(nullptr, 10, 0), InvalidArgument);
  EXPECT_THROW(kth_largest_key(nullptr, 10, 11), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd::cuda
