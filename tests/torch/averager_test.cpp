// The GradientAverager's momentum correction (DGC) against a plain serial reference: each worker's
// velocity u = m u + g, error feedback on u, the aggregation of the selections, and momentum factor
// masking of what was consumed, over several steps, for many worker counts, aggregators and
// compressors; with conservation of mass through velocity and residual.

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::torch_layer {
namespace {

collectives::ExchangeConfig exchange_config(const std::string& compressor, const std::string& aggregator,
                                            double density) {
  collectives::ExchangeConfig c;
  c.compressor.name = compressor;
  c.aggregator = aggregator;
  c.density = density;
  return c;
}

struct AveragerObserved {
  std::vector<float> average, residual, velocity;
};

void run_case(int workers, const std::string& compressor, const std::string& aggregator, double density,
              std::size_t n) {
  const float momentum = 0.75f;
  const int steps = 4;
  const auto config = exchange_config(compressor, aggregator, density);
  std::vector<std::vector<AveragerObserved>> seen(steps, std::vector<AveragerObserved>(static_cast<std::size_t>(workers)));
  transport::run_local_workers(workers, [&](transport::Transport& t) {
    GradientAverager averager(t, {{0, n / 3}, {n / 3, n}}, {"a", "b"}, config, false, false, momentum);
    std::vector<float> gradient(n), average(n);
    for (int s = 0; s < steps; ++s) {
      fill_gradient(gradient, 11, t.rank(), static_cast<std::uint64_t>(s));
      averager.average(gradient, average, static_cast<std::uint64_t>(s));
      AveragerObserved& o = seen[static_cast<std::size_t>(s)][static_cast<std::size_t>(t.rank())];
      o.average = average;
      o.residual = averager.residuals()[0];
      o.velocity = averager.local_velocity();
    }
  });

  // The reference: plain loops over workers and entries.
  const std::size_t k = k_from_density(n, density);
  auto selector = compress::make_compressor(config.compressor);
  std::vector<std::vector<float>> velocity(static_cast<std::size_t>(workers), std::vector<float>(n, 0.0f));
  std::vector<std::vector<float>> residual = velocity;
  std::vector<float> gradient(n);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> acc(static_cast<std::size_t>(workers));
    std::vector<SparseVector> selections(static_cast<std::size_t>(workers));
    double mass_in = 0.0;
    for (int w = 0; w < workers; ++w) {
      const auto W = static_cast<std::size_t>(w);
      fill_gradient(gradient, 11, w, static_cast<std::uint64_t>(s));
      acc[W].resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        velocity[W][i] = momentum * velocity[W][i] + gradient[i];
        acc[W][i] = velocity[W][i] + residual[W][i];
        mass_in += acc[W][i];
      }
      selector->compress(acc[W], k, {static_cast<std::uint64_t>(s), w}, selections[W]);
    }
    const auto want = collectives::reference_aggregate(aggregator, selections, k);
    const std::vector<float> expected = collectives::reference_average(want, n, workers);
    double mass_out = 0.0;
    for (int w = 0; w < workers; ++w) {
      const auto W = static_cast<std::size_t>(w);
      residual[W] = acc[W];
      for (std::size_t j = 0; j < selections[W].size(); ++j) {
        if (!want.dense && !want.consumed[W][j]) continue;
        residual[W][selections[W].indices[j]] = 0.0f;
        velocity[W][selections[W].indices[j]] = 0.0f;
      }
      if (want.dense) std::fill(velocity[W].begin(), velocity[W].end(), 0.0f);
      for (std::size_t i = 0; i < n; ++i) mass_out += residual[W][i];
      const AveragerObserved& o = seen[static_cast<std::size_t>(s)][W];
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(o.average[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i])))
            << "average, step " << s << " worker " << w << " entry " << i;
        ASSERT_NEAR(o.residual[i], residual[W][i], 1e-5f * (1.0f + std::fabs(residual[W][i])))
            << "residual, step " << s << " worker " << w << " entry " << i;
        ASSERT_NEAR(o.velocity[i], velocity[W][i], 1e-5f * (1.0f + std::fabs(velocity[W][i])))
            << "velocity, step " << s << " worker " << w << " entry " << i;
      }
    }
    // Conservation: what the workers accumulated is what was averaged (times P) plus what they kept.
    for (std::size_t i = 0; i < n; ++i) mass_out += static_cast<double>(expected[i]) * workers;
    ASSERT_NEAR(mass_in, mass_out, 1e-3 * (1.0 + std::fabs(mass_in))) << "conservation, step " << s;
  }
}

TEST(GradientAverager, MomentumCorrectionMatchesSerialReference) {
  for (const int workers : {1, 2, 3, 4, 5, 7, 8}) {
    for (const char* aggregator : {"allgather", "gtopk", "gtopk-rd"}) {
      SCOPED_TRACE(std::string(aggregator) + " P=" + std::to_string(workers));
      run_case(workers, "topk", aggregator, 0.05, 300);
    }
    SCOPED_TRACE("dense P=" + std::to_string(workers));
    run_case(workers, "none", "dense", 1.0, 300);
  }
  for (const char* compressor : {"randk", "rtopk", "gaussiank", "dgc"}) {
    SCOPED_TRACE(compressor);
    run_case(3, compressor, "gtopk-rd", 0.05, 300);
  }
  SCOPED_TRACE("tiny buffers");
  run_case(5, "topk", "gtopk-rd", 0.5, 3);
  run_case(16, "topk", "gtopk-rd", 0.01, 1000);
}

TEST(GradientAverager, MomentumCorrectionValidatesMomentumAndCheckpointedVelocity) {
  transport::run_local_workers(1, [](transport::Transport& t) {
    const auto config = exchange_config("topk", "gtopk-rd", 0.5);
    for (const double bad : {-0.1, 1.0, std::nan("")}) {
      EXPECT_THROW(GradientAverager(t, {{0, 4}}, {"w"}, config, false, false, bad), InvalidArgument) << bad;
    }
    GradientAverager plain(t, {{0, 4}}, {"w"}, config, false, false);
    EXPECT_TRUE(plain.local_velocity().empty());
    EXPECT_THROW(plain.set_local_velocity(std::vector<float>(4, 1.0f)), InvalidArgument);
    GradientAverager corrected(t, {{0, 4}}, {"w"}, config, false, false, 0.9);
    EXPECT_THROW(corrected.set_local_velocity(std::vector<float>(3, 1.0f)), InvalidArgument);
    corrected.set_local_velocity({1.0f, 2.0f, 3.0f, 4.0f});
    // u = 0.9 [1 2 3 4] + [0 0 0 1] = [.9 1.8 2.7 4.6]; top-2 sends indices 2 and 3, which leave u.
    std::vector<float> gradient{0.0f, 0.0f, 0.0f, 1.0f}, average(4);
    corrected.average(gradient, average, 0);
    EXPECT_FLOAT_EQ(average[3], 4.6f);
    EXPECT_FLOAT_EQ(average[2], 2.7f);
    EXPECT_EQ(average[0], 0.0f);
    EXPECT_FLOAT_EQ(corrected.local_velocity()[1], 1.8f);
    EXPECT_EQ(corrected.local_velocity()[3], 0.0f);
  });
}

}  // namespace
}  // namespace sparsgd::torch_layer
