// cuda::magnitude_counts against its CPU twin, select::filter_greater (counts only), on the same
// inputs: sizes from 0 to past a grid's reach, pivots below, at and above the data, ties, both
// zeros, denormals, NaN and Inf. Skipped, naming why, where the process sees no CUDA device.

#include "sparsgd/cuda/magnitude_counts.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/random.hpp"
#include "sparsgd/cuda/device.hpp"
#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::cuda {
namespace {

class MagnitudeCounts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "needs a CUDA device: " << unavailable_reason();
  }
};

// The device's answer for x, through a device copy of it.
cuda::MagnitudeCounts on_device(const std::vector<float>& x, std::uint32_t pivot) {
  float* device = nullptr;
  if (!x.empty()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), x.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(device, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  const auto counts = magnitude_counts(device, x.size(), pivot);
  cudaFree(device);
  return counts;
}

void expect_twins(const std::vector<float>& x, std::uint32_t pivot) {
  std::vector<std::uint32_t> no_indices(select::filter_padding());
  std::vector<float> no_values(select::filter_padding());
  const select::FilterCounts cpu = select::filter_greater(x, pivot, no_indices.data(), no_values.data(), 0);
  const cuda::MagnitudeCounts gpu = on_device(x, pivot);
  EXPECT_EQ(gpu.greater, cpu.greater) << "n " << x.size() << " pivot " << pivot;
  EXPECT_EQ(gpu.equal, cpu.equal) << "n " << x.size() << " pivot " << pivot;
  EXPECT_EQ(gpu.max_key, cpu.max_key) << "n " << x.size() << " pivot " << pivot;
}

TEST_F(MagnitudeCounts, MatchesTheCpuPassOnRandomData) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{256}, std::size_t{1000003},
                        std::size_t{5} << 20}) {
    std::vector<float> x(n);
    Rng rng(n + 1);
    for (auto& v : x) v = static_cast<float>(4.0 * rng.uniform() - 2.0);
    for (float pivot_value : {0.0f, 0.5f, 1.0f, 3.0f, 100.0f}) {
      expect_twins(x, select::magnitude_key(pivot_value));
    }
    if (n > 0) expect_twins(x, select::magnitude_key(x[n / 2]));  // a pivot that is in the data
  }
}

TEST_F(MagnitudeCounts, TiesZerosDenormalsAndNonFinite) {
  const float denormal = std::numeric_limits<float>::denorm_min();
  std::vector<float> x;
  for (int repeat = 0; repeat < 1000; ++repeat) {
    x.insert(x.end(), {0.0f, -0.0f, denormal, -denormal, 1.0f, -1.0f, 1.0f, 2.0f});
  }
  for (float pivot : {0.0f, denormal, 1.0f, 2.0f}) expect_twins(x, select::magnitude_key(pivot));
  x[4321] = std::numeric_limits<float>::infinity();
  x[17] = -std::numeric_limits<float>::quiet_NaN();
  expect_twins(x, select::magnitude_key(2.0f));
  expect_twins(x, select::kNonFiniteKey);
}

TEST_F(MagnitudeCounts, AHostPointerIsAClearError) {
  std::vector<float> host(1 << 16, 1.0f);
  // Where the device can read pageable host memory (HMM, some platforms) the call is legal and counts.
  try {
    const auto counts = magnitude_counts(host.data(), host.size(), 0);
    EXPECT_EQ(counts.greater, host.size());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
}

// Runs everywhere: the query itself must answer, with a reason exactly when there is no device.
TEST(CudaDevice, CountAndReasonAgree) {
  const int count = device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(unavailable_reason().empty(), count > 0) << unavailable_reason();
}

}  // namespace
}  // namespace sparsgd::cuda
