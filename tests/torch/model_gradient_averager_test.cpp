// The gradient synchronizer (any optimizer): the average written into .grad against the serial
// reference of the same semantics, conservation of gradient mass through error feedback, per-layer
// exchanges, parameters without gradients, non-finite gradients, and torch::optim optimizers
// stepping identically on every worker.

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <mutex>

#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/torch/model_gradient_averager.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::torch_layer {
namespace {

ModelAveragerConfig config(const std::string& compressor, const std::string& aggregator, double density) {
  ModelAveragerConfig c;
  c.exchange.compressor.name = compressor;
  c.exchange.aggregator = aggregator;
  c.exchange.density = density;
  return c;
}

std::vector<float> values_of(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

struct Observed {
  std::vector<float> acc, average, residual;
  SparseVector selection;
};

// Two parameters of 37 and 300 floats; worker w's gradient at step s comes from fill_gradient.
void run_case(int workers, const std::string& compressor, const std::string& aggregator, double density) {
  const std::size_t n = 337;
  const int steps = 3;
  std::vector<std::vector<Observed>> seen(steps, std::vector<Observed>(static_cast<std::size_t>(workers)));
  transport::run_local_workers(workers, [&](transport::Transport& t) {
    auto a = torch::zeros({37}).requires_grad_(true), b = torch::zeros({10, 30}).requires_grad_(true);
    ModelGradientAverager sync(t, {a, b}, {"a", "b"}, config(compressor, aggregator, density));
    ASSERT_EQ(sync.size(), n);
    std::vector<float> gradient(n);
    for (int s = 0; s < steps; ++s) {
      fill_gradient(gradient, 5, t.rank(), static_cast<std::uint64_t>(s));
      a.mutable_grad() = torch::from_blob(gradient.data(), {37}).clone();
      b.mutable_grad() = torch::from_blob(gradient.data() + 37, {10, 30}).clone();
      Observed& o = seen[static_cast<std::size_t>(s)][static_cast<std::size_t>(t.rank())];
      const auto before = sync.averager().residuals()[0];
      o.acc = gradient;
      for (std::size_t i = 0; i < n; ++i) o.acc[i] += before[i];
      const StepStats stats = sync.synchronize(static_cast<std::uint64_t>(s));
      EXPECT_FALSE(stats.skipped);
      o.average = values_of(a.grad());
      const auto rest = values_of(b.grad());
      o.average.insert(o.average.end(), rest.begin(), rest.end());
      o.residual = sync.averager().residuals()[0];
      o.selection = sync.averager().exchange(0).last_selection();
    }
  });
  const std::size_t k = k_from_density(n, density);
  for (int s = 0; s < steps; ++s) {
    const auto& at = seen[static_cast<std::size_t>(s)];
    std::vector<SparseVector> selections;
    for (const auto& o : at) selections.push_back(o.selection);
    const auto want = collectives::reference_aggregate(aggregator, selections, k);
    const std::vector<float> expected = collectives::reference_average(want, n, workers);
    for (int w = 0; w < workers; ++w) {
      const auto& o = at[static_cast<std::size_t>(w)];
      for (std::size_t i = 0; i < n; ++i) {
        // The average is divided by P exactly once; the dense ring sums in another order.
        ASSERT_NEAR(o.average[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i])))
            << "step " << s << " worker " << w << " entry " << i;
        ASSERT_EQ(o.average[i], at[0].average[i]) << "workers disagree at step " << s << " entry " << i;
      }
    }
    // Conservation: sum_w acc_w == P * average + sum_w residual_w.
    for (std::size_t i = 0; i < n; ++i) {
      double lhs = 0.0, rhs = static_cast<double>(at[0].average[i]) * workers;
      for (const auto& o : at) {
        lhs += o.acc[i];
        rhs += o.residual[i];
      }
      ASSERT_NEAR(lhs, rhs, 1e-4 * (1.0 + std::fabs(lhs))) << "conservation, step " << s << " entry " << i;
    }
  }
}

TEST(ModelGradientAverager, AverageMatchesReferenceAndConservesMass) {
  for (const int workers : {1, 2, 3, 4, 5, 7, 8}) {
    for (const char* aggregator : {"allgather", "gtopk", "gtopk-rd"}) {
      SCOPED_TRACE(std::string(aggregator) + " P=" + std::to_string(workers));
      run_case(workers, "topk", aggregator, 0.05);
    }
    SCOPED_TRACE("dense P=" + std::to_string(workers));
    run_case(workers, "none", "dense", 1.0);
  }
  for (const char* compressor : {"randk", "rtopk", "gaussiank", "dgc"}) {
    SCOPED_TRACE(compressor);
    run_case(3, compressor, "gtopk-rd", 0.05);
  }
}

TEST(ModelGradientAverager, PerLayerExchangesEachParameterAndFillsMissingGradients) {
  transport::run_local_workers(3, [](transport::Transport& t) {
    auto a = torch::zeros({50}).requires_grad_(true), unused = torch::zeros({7}).requires_grad_(true);
    auto c = torch::zeros({200}).requires_grad_(true);
    auto cfg = config("topk", "gtopk-rd", 0.1);
    cfg.per_layer = true;
    ModelGradientAverager sync(t, {a, unused, c}, {"a", "unused", "c"}, cfg);
    EXPECT_EQ(sync.averager().exchange_count(), 3u);
    a.mutable_grad() = torch::full({50}, 1.0f + static_cast<float>(t.rank()));
    c.mutable_grad() = torch::arange(200, torch::kFloat32);
    sync.synchronize(0);
    ASSERT_TRUE(unused.grad().defined());
    EXPECT_EQ(unused.grad().abs().sum().item<float>(), 0.0f);
    // k = 5 of 50 per layer: every rank sent equal indices 0..4 (ties by index) of a's gradient.
    EXPECT_EQ(torch::count_nonzero(a.grad()).item<std::int64_t>(), 5);
    EXPECT_FLOAT_EQ(a.grad()[0].item<float>(), 2.0f);  // (1 + 2 + 3) / 3
    EXPECT_FLOAT_EQ(c.grad()[199].item<float>(), 199.0f);
    EXPECT_EQ(c.grad()[0].item<float>(), 0.0f);
  });
}

TEST(ModelGradientAverager, NonFiniteGradientStopsOrSkipsOnEveryWorker) {
  try {
    transport::run_local_workers(2, [](transport::Transport& t) {
      auto p = torch::zeros({10}).requires_grad_(true);
      ModelGradientAverager sync(t, {p}, {"fc.weight"}, config("topk", "gtopk-rd", 0.2));
      p.mutable_grad() = torch::ones({10});
      if (t.rank() == 1) p.mutable_grad()[3] = std::nanf("");
      sync.synchronize(4);
    });
    FAIL() << "accepted a NaN gradient";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite gradient (nan) in parameter 'fc.weight' at element 3, iteration 4 on rank 1"),
              std::string::npos) << e.what();
  }
  transport::run_local_workers(3, [](transport::Transport& t) {
    auto p = torch::zeros({10}).requires_grad_(true);
    auto cfg = config("topk", "gtopk-rd", 0.2);
    cfg.skip_nonfinite = true;
    ModelGradientAverager sync(t, {p}, {"w"}, cfg);
    p.mutable_grad() = torch::ones({10});
    if (t.rank() == 2) p.mutable_grad()[0] = INFINITY;
    const StepStats stats = sync.synchronize(0);
    EXPECT_TRUE(stats.skipped);
    EXPECT_EQ(stats.bytes_sent, 0u);
    EXPECT_EQ(sync.averager().residuals()[0], std::vector<float>(10, 0.0f));  // nothing accumulated
  });
}

// Any torch::optim optimizer steps on the synchronized gradient, and the workers stay identical.
TEST(ModelGradientAverager, AdamAndAdamWStepIdenticallyOnEveryWorker) {
  for (const bool decoupled : {false, true}) {
    std::vector<std::vector<float>> finals(4);
    std::vector<float> first_loss(4), last_loss(4);
    transport::run_local_workers(4, [&](transport::Transport& t) {
      torch::manual_seed(static_cast<std::uint64_t>(t.rank()) + 1);  // different initial values per rank
      torch::nn::Linear model(8, 1);
      std::vector<std::string> names;
      for (const auto& p : model->named_parameters()) names.push_back(p.key());
      ModelGradientAverager sync(t, model->parameters(), names, config("topk", "gtopk-rd", 0.5));
      sync.broadcast_parameters();
      std::unique_ptr<torch::optim::Optimizer> opt;
      if (decoupled) {
        opt = std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(0.05));
      } else {
        opt = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.05));
      }
      torch::manual_seed(100 + static_cast<std::uint64_t>(t.rank()));  // each rank its own data
      const auto target_w = torch::arange(8, torch::kFloat32).reshape({8, 1}) / 8.0f;
      for (int s = 0; s < 150; ++s) {
        const auto x = torch::randn({16, 8});
        const auto loss = (model->forward(x) - x.matmul(target_w)).pow(2).mean();
        if (s == 0) first_loss[static_cast<std::size_t>(t.rank())] = loss.item<float>();
        last_loss[static_cast<std::size_t>(t.rank())] = loss.item<float>();
        opt->zero_grad();
        loss.backward();
        sync.synchronize(static_cast<std::uint64_t>(s));
        opt->step();
      }
      finals[static_cast<std::size_t>(t.rank())] = values_of(model->weight);
    });
    for (int r = 1; r < 4; ++r) EXPECT_EQ(finals[static_cast<std::size_t>(r)], finals[0]) << "rank " << r;
    EXPECT_LT(last_loss[0], 0.1f * first_loss[0]) << (decoupled ? "AdamW" : "Adam") << " did not learn";
  }
}

}  // namespace
}  // namespace sparsgd::torch_layer
