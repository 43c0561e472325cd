// The distributed optimizer against a hand computation, and the pieces of training that do not
// need a model: sharding and checkpoints.

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/momentum_sgd.hpp"
#include "sparsgd/torch/sharding.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::torch_layer {
namespace {

collectives::ExchangeConfig exchange(const std::string& compressor, const std::string& aggregator, double density) {
  collectives::ExchangeConfig c;
  c.compressor.name = compressor;
  c.aggregator = aggregator;
  c.density = density;
  return c;
}

// Two workers, one parameter vector [1, 2, 3, 4]; worker w's gradient at step s is
// (w + 1) * (s + 1) * [1, -2, 0.5, 4]. Dense: the average is 1.5 (s + 1) g.
TEST(MomentumSgd, DenseMatchesHandComputedMomentumSgdWithWeightDecay) {
  const float g[4] = {1.0f, -2.0f, 0.5f, 4.0f};
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  std::vector<std::vector<float>> final_values(2);
  transport::run_local_workers(2, [&](transport::Transport& t) {
    auto p = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).requires_grad_(true);
    MomentumSgd opt(t, {p}, {"w"}, exchange("none", "dense", 1.0), SgdConfig{mu, false, wd, false, false});
    for (int s = 0; s < 3; ++s) {
      p.mutable_grad() = torch::tensor({g[0], g[1], g[2], g[3]}) * static_cast<float>((t.rank() + 1) * (s + 1));
      opt.step(static_cast<std::uint64_t>(s), lr);
    }
    final_values[static_cast<std::size_t>(t.rank())] = std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + 4);
  });
  // Hand computation in double.
  double w[4] = {1, 2, 3, 4}, v[4] = {0, 0, 0, 0};
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 4; ++i) {
      const double d = 1.5 * (s + 1) * g[i] + wd * w[i];
      v[i] = mu * v[i] + d;
      w[i] -= lr * v[i];
    }
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(final_values[0][static_cast<std::size_t>(i)], w[i], 1e-5) << i;
    EXPECT_EQ(final_values[0][static_cast<std::size_t>(i)], final_values[1][static_cast<std::size_t>(i)]) << i;
  }
}

// One worker, top-1 of 4 with error feedback and no momentum: the residual carries the rest.
TEST(MomentumSgd, TopkWithErrorFeedbackMatchesHandComputation) {
  transport::run_local_workers(1, [&](transport::Transport& t) {
    auto p = torch::zeros({4}).requires_grad_(true);
    MomentumSgd opt(t, {p}, {"w"}, exchange("topk", "gtopk", 0.25), SgdConfig{0.0, false, 0.0, false, false});
    // Step 0: g = [1, -3, 2, 0.5]: sends index 1 (-3); residual [1, 0, 2, 0.5].
    p.mutable_grad() = torch::tensor({1.0f, -3.0f, 2.0f, 0.5f});
    opt.step(0, 1.0);
    EXPECT_TRUE(torch::equal(p, torch::tensor({0.0f, 3.0f, 0.0f, 0.0f})));
    // Step 1: g = [1, 0, 0.5, 0]: acc = [2, 0, 2.5, 0.5]: sends index 2; residual [2, 0, 0, 0.5].
    p.mutable_grad() = torch::tensor({1.0f, 0.0f, 0.5f, 0.0f});
    opt.step(1, 1.0);
    EXPECT_TRUE(torch::equal(p, torch::tensor({0.0f, 3.0f, -2.5f, 0.0f})));
    EXPECT_EQ(opt.residuals().front(), (std::vector<float>{2.0f, 0.0f, 0.0f, 0.5f}));
  });
}

TEST(MomentumSgd, NesterovAndMomentumCorrectionRun) {
  transport::run_local_workers(2, [&](transport::Transport& t) {
    auto p = torch::ones({8}).requires_grad_(true);
    MomentumSgd nesterov(t, {p}, {"w"}, exchange("topk", "gtopk-rd", 0.25), SgdConfig{0.9, true, 0.0, false, false});
    p.mutable_grad() = torch::arange(8, torch::kFloat32);
    nesterov.step(0, 0.1);
    // Nesterov on the averaged top-2 [.., 6, 7]: d = g, v = g, update = lr (d + mu v) = 0.19 g.
    EXPECT_NEAR(p[7].item<float>(), 1.0f - 0.19f * 7.0f, 1e-6);
    EXPECT_NEAR(p[0].item<float>(), 1.0f, 1e-6);

    auto q = torch::ones({8}).requires_grad_(true);
    MomentumSgd dgc(t, {q}, {"w"}, exchange("topk", "allgather", 0.25), SgdConfig{0.5, false, 0.0, true, false});
    q.mutable_grad() = torch::arange(8, torch::kFloat32);
    dgc.step(0, 1.0);
    // Sent entries leave the local velocity (momentum factor masking); the others stay.
    EXPECT_EQ(dgc.local_velocity()[7], 0.0f);
    EXPECT_EQ(dgc.local_velocity()[5], 5.0f);
    EXPECT_NEAR(q[7].item<float>(), 1.0f - 7.0f, 1e-6);
  });
}

TEST(MomentumSgd, PerLayerCompressesEachTensorOnItsOwn) {
  transport::run_local_workers(1, [&](transport::Transport& t) {
    auto a = torch::zeros({4}).requires_grad_(true);
    auto b = torch::zeros({4}).requires_grad_(true);
    MomentumSgd opt(t, {a, b}, {"a", "b"}, exchange("topk", "gtopk", 0.25), SgdConfig{0.0, false, 0.0, false, true});
    a.mutable_grad() = torch::tensor({0.0f, 0.0f, 0.0f, 10.0f});
    b.mutable_grad() = torch::tensor({1.0f, 0.0f, 0.0f, 0.0f});
    opt.step(0, 1.0);
    // Whole-model top-2 of 8 would also pick both; top-1 per layer must pick one of each.
    EXPECT_EQ(a[3].item<float>(), -10.0f);
    EXPECT_EQ(b[0].item<float>(), -1.0f);
    EXPECT_EQ(opt.residuals().size(), 2u);
  });
}

TEST(MomentumSgd, NonFiniteGradientIsNamedAndNotSent) {
  try {
    transport::run_local_workers(1, [&](transport::Transport& t) {
      auto a = torch::zeros({3}).requires_grad_(true);
      auto b = torch::zeros({2}).requires_grad_(true);
      MomentumSgd opt(t, {a, b}, {"conv.weight", "fc.bias"}, exchange("topk", "gtopk", 0.5), SgdConfig{});
      a.mutable_grad() = torch::zeros({3});
      b.mutable_grad() = torch::tensor({0.0f, std::nanf("")});
      opt.step(7, 0.1);
    });
    FAIL() << "expected InvalidData";
  } catch (const InvalidData& e) {
    EXPECT_NE(std::string(e.what()).find("fc.bias"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("iteration 7"), std::string::npos) << e.what();
  }
}

// skip_nonfinite: a NaN on one worker at step 1 makes every worker skip that step, leaving
// parameters, velocity and residuals exactly as if the step had not been taken.
TEST(MomentumSgd, SkipNonFiniteSkipsTheStepOnEveryWorker) {
  for (const bool with_nan : {true, false}) {
    std::vector<std::vector<float>> finals(3), residuals(3);
    std::vector<int> skipped(3, 0);
    transport::run_local_workers(3, [&](transport::Transport& t) {
      auto p = torch::ones({6}).requires_grad_(true);
      SgdConfig sgd{0.9, false, 0.0, false, false};
      sgd.skip_nonfinite = true;
      MomentumSgd opt(t, {p}, {"w"}, exchange("topk", "gtopk-rd", 0.34), sgd);
      for (int s = 0; s < 3; ++s) {
        if (s == 1 && !with_nan) continue;  // the reference: the step never happens
        p.mutable_grad() = torch::arange(6, torch::kFloat32) * static_cast<float>((t.rank() + 1) * (s + 1));
        if (s == 1 && t.rank() == 1) p.mutable_grad()[4] = std::nanf("");
        const StepStats stats = opt.step(static_cast<std::uint64_t>(s), 0.1);
        const auto r = static_cast<std::size_t>(t.rank());
        if (stats.skipped) {
          ++skipped[r];
          EXPECT_NE(stats.skip_reason.find(t.rank() == 1 ? "parameter 'w' at element 4" : "rank 1"), std::string::npos)
              << stats.skip_reason;
        }
      }
      const auto r = static_cast<std::size_t>(t.rank());
      finals[r] = std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + 6);
      residuals[r] = opt.residuals().front();
    });
    static std::vector<std::vector<float>> reference_finals, reference_residuals;
    if (with_nan) {
      EXPECT_EQ(skipped, (std::vector<int>{1, 1, 1}));
      reference_finals = finals;
      reference_residuals = residuals;
    } else {
      EXPECT_EQ(skipped, (std::vector<int>{0, 0, 0}));
      EXPECT_EQ(finals, reference_finals);
      EXPECT_EQ(residuals, reference_residuals);
    }
  }
}

TEST(MomentumSgd, BroadcastGivesEveryWorkerRankZerosParameters) {
  std::vector<float> seen(5);
  std::mutex m;
  transport::run_local_workers(5, [&](transport::Transport& t) {
    auto p = torch::full({3}, static_cast<float>(t.rank() + 10)).requires_grad_(true);
    MomentumSgd opt(t, {p}, {"w"}, exchange("topk", "gtopk", 0.5), SgdConfig{});
    opt.broadcast_parameters();
    std::lock_guard lock(m);
    seen[static_cast<std::size_t>(t.rank())] = p[2].item<float>();
  });
  for (const float v : seen) EXPECT_EQ(v, 10.0f);
}

TEST(Sharding, EverySampleExactlyOncePerEpochAndOrdersDiffer) {
  for (const std::size_t n : {1u, 7u, 1000u, 60000u}) {
    for (const int p : {1, 2, 3, 4, 7}) {
      const auto order = epoch_permutation(n, 5, 2);
      std::vector<int> seen(n, 0);
      std::size_t largest = 0;
      for (int r = 0; r < p; ++r) {
        const auto [b, e] = shard_range(n, p, r);
        largest = std::max(largest, e - b);
        for (std::size_t i = b; i < e; ++i) ++seen[order[i]];
      }
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " P " << p << " sample " << i;
      EXPECT_EQ(iterations_per_epoch(n, p, 32), (largest + 31) / 32);
    }
  }
  EXPECT_EQ(epoch_permutation(1000, 5, 2), epoch_permutation(1000, 5, 2));
  EXPECT_NE(epoch_permutation(1000, 5, 2), epoch_permutation(1000, 5, 3));
  EXPECT_NE(epoch_permutation(1000, 5, 2), epoch_permutation(1000, 6, 2));
}

}  // namespace
}  // namespace sparsgd::torch_layer
