// The device path (torch/device_*.hpp) held to the host engine on the same inputs, on CPU tensors:
// every compressor's selection entry for entry; every compressor and aggregator's averaged result,
// residuals and velocities over several steps at P = 1, 2, 3, 4, 5, 7, 8; conservation of mass.
// (On a GPU the same code runs; scripts/gpu-check.sh holds it to this path there.)

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <numeric>

#include "support/reference.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/torch/device_gradient_averager.hpp"
#include "sparsgd/torch/device_selection.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/torch/training_optimizer.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd::torch_layer::device_path_test {
namespace {

torch::Tensor tensor_of(const std::vector<float>& x) {
  return torch::from_blob(const_cast<float*>(x.data()), {static_cast<std::int64_t>(x.size())}, torch::kFloat32).clone();
}

std::vector<float> floats_of(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

SparseVector sparse_of(const DeviceSelection& s, std::size_t n) {
  SparseVector out;
  out.dim = n;
  const torch::Tensor indices = s.indices.to(torch::kCPU);
  for (std::int64_t i = 0; i < indices.numel(); ++i) out.indices.push_back(static_cast<std::uint32_t>(indices[i].item<std::int64_t>()));
  out.values = floats_of(s.values);
  return out;
}

TEST(DeviceSelection, EveryRegisteredCompressorHasATwin) {
  for (const std::string& name : compress::compressor_names()) {
    compress::CompressorConfig config;
    config.name = name;
    EXPECT_NO_THROW(make_device_compressor(config)) << name;
  }
}

// Entry for entry the host's selection, over sizes from 1, densities to 1, every distribution
// (all ties among them), and consecutive iterations (topk-reuse keeps its pivot between them).
TEST(DeviceSelection, SelectsWhatTheHostSelects) {
  for (const std::string& name : compress::compressor_names()) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}}) {
      for (const double density : {0.001, 0.01, 0.3, 1.0}) {
        for (const Distribution distribution : test::all_distributions()) {
          compress::CompressorConfig config;
          config.name = name;
          config.seed = 5;
          config.threshold_period = 3;
          config.r_factor = 2.5;
          auto host = compress::make_compressor(config);
          auto device = make_device_compressor(config);
          const std::size_t k = k_from_density(n, density);
          for (std::uint64_t iteration = 0; iteration < 4; ++iteration) {
            std::vector<float> acc = test::synthetic(n, distribution, 100 + iteration);
            // A slowly drifting scale, so that topk-reuse's kept pivot sometimes misses.
            for (float& v : acc) v *= 1.0f + 0.3f * static_cast<float>(iteration);
            const compress::CompressContext context{iteration, 3};
            SparseVector want;
            host->compress(acc, k, context, want);
            const SparseVector got = sparse_of(device->select(tensor_of(acc), k, context), n);
            ASSERT_TRUE(test::same_sparse(got, want))
                << name << " n " << n << " density " << density << " " << to_string(distribution) << " iteration "
                << iteration;
          }
        }
      }
    }
  }
}

TEST(DeviceSelection, RefusesNonFiniteValuesAsTheHostDoes) {
  for (const std::string& name : compress::compressor_names()) {
    compress::CompressorConfig config;
    config.name = name;
    std::vector<float> acc = test::synthetic(100, Distribution::normal, 1);
    acc[37] = std::nanf("");
    auto device = make_device_compressor(config);
    try {
      device->select(tensor_of(acc), 10, {});
      ADD_FAILURE() << name << " accepted a NaN";
    } catch (const InvalidData& e) {
      EXPECT_NE(std::string(e.what()).find("at index 37"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceSelection, TopkBreaksTiesByLowerIndex) {
  std::vector<float> acc(1000, 0.5f);
  for (std::size_t i = 0; i < acc.size(); i += 2) acc[i] = -0.5f;
  const torch::Tensor indices = device_ops::exact_topk_indices(device_ops::magnitude_keys(tensor_of(acc)), 10);
  EXPECT_TRUE(indices.equal(torch::arange(10, torch::kInt64)));
}

struct Observed {
  std::vector<float> average, residual, velocity;
};

using Record = std::vector<std::vector<Observed>>;  // [step][rank]

collectives::ExchangeConfig config_for(const std::string& compressor, const std::string& aggregator) {
  collectives::ExchangeConfig c;
  c.compressor.name = compressor;
  c.compressor.seed = 9;
  c.compressor.threshold_period = 2;
  c.compressor.shared_seed = collectives::find_aggregator(aggregator).properties.needs_shared_indices;
  c.aggregator = aggregator;
  c.density = 0.03;
  c.error_feedback = !compress::find_compressor(compressor).properties.scales_values;
  c.auto_trial_rounds = 0;  // auto's choice from the closed forms: the same in both runs
  c.network = {.alpha_seconds = 1e-4, .seconds_per_byte = 8e-9, .known = true};
  return c;
}

template <typename Averager>
Record run(int workers, const collectives::ExchangeConfig& config, double momentum, std::size_t n, int steps) {
  Record seen(static_cast<std::size_t>(steps), std::vector<Observed>(static_cast<std::size_t>(workers)));
  transport::run_local_workers(workers, [&](transport::Transport& t) {
    const Segments segments{{0, n / 3}, {n / 3, n / 3}, {n / 3, n}};  // an empty one among them
    std::vector<float> gradient(n);
    if constexpr (std::is_same_v<Averager, GradientAverager>) {
      GradientAverager averager(t, segments, {"a", "b", "c"}, config, false, false, momentum);
      std::vector<float> average(n);
      for (int s = 0; s < steps; ++s) {
        fill_gradient(gradient, 21, t.rank(), static_cast<std::uint64_t>(s));
        averager.average(gradient, average, static_cast<std::uint64_t>(s));
        seen[static_cast<std::size_t>(s)][static_cast<std::size_t>(t.rank())] =
            Observed{average, averager.residuals()[0], averager.local_velocity()};
      }
    } else {
      DeviceGradientAverager averager(t, segments, {"a", "b", "c"}, config, false, false, momentum, torch::kCPU);
      torch::Tensor average = torch::empty({static_cast<std::int64_t>(n)});
      for (int s = 0; s < steps; ++s) {
        fill_gradient(gradient, 21, t.rank(), static_cast<std::uint64_t>(s));
        averager.average(tensor_of(gradient), average, static_cast<std::uint64_t>(s));
        seen[static_cast<std::size_t>(s)][static_cast<std::size_t>(t.rank())] =
            Observed{floats_of(average), floats_of(averager.residuals()[0]), floats_of(averager.local_velocity())};
      }
    }
  });
  return seen;
}

// The host averager and the device path on the same gradients: the same entries in every average
// (values to a float rounding: the device divides by P as torch does), residuals and velocities bit
// for bit, and conservation on the device path: sum of acc = P * average + sum of residuals.
TEST(DeviceGradientAverager, MatchesTheHostAveragerForEveryCompressorAndAggregator) {
  const std::size_t n = 601;
  const int steps = 3;
  int cases = 0;
  for (const int workers : {1, 2, 3, 4, 5, 7, 8}) {
    for (const std::string& compressor : compress::compressor_names()) {
      for (const std::string& aggregator : collectives::aggregator_names()) {
        const auto config = config_for(compressor, aggregator);
        try {
          collectives::validate(config);
        } catch (const InvalidArgument&) {
          continue;  // a combination the engine refuses (tests/collectives covers the refusal)
        }
        const double momentum = (workers + cases) % 2 == 0 ? 0.0 : 0.9;
        SCOPED_TRACE(compressor + " + " + aggregator + " P=" + std::to_string(workers) +
                     " momentum " + std::to_string(momentum));
        const Record host = run<GradientAverager>(workers, config, momentum, n, steps);
        const Record device = run<DeviceGradientAverager>(workers, config, momentum, n, steps);
        std::vector<double> acc_mass(static_cast<std::size_t>(workers), 0.0);
        for (int s = 0; s < steps; ++s) {
          for (int w = 0; w < workers; ++w) {
            const Observed& h = host[static_cast<std::size_t>(s)][static_cast<std::size_t>(w)];
            const Observed& d = device[static_cast<std::size_t>(s)][static_cast<std::size_t>(w)];
            ASSERT_EQ(d.average.size(), n);
            for (std::size_t i = 0; i < n; ++i) {
              ASSERT_EQ(d.average[i] == 0.0f, h.average[i] == 0.0f) << "step " << s << " rank " << w << " entry " << i;
              ASSERT_NEAR(d.average[i], h.average[i], 1e-6f * std::abs(h.average[i])) << "step " << s << " entry " << i;
            }
            ASSERT_EQ(d.residual, h.residual) << "step " << s << " rank " << w;
            ASSERT_EQ(d.velocity, h.velocity) << "step " << s << " rank " << w;
          }
          // Conservation: what went in (each worker's gradient, or its velocity's increment, plus
          // what its residual held) equals what the average carried plus what stayed behind.
          if (!config.error_feedback || momentum > 0.0) continue;
          double in = 0.0, out = 0.0;
          std::vector<float> gradient(n);
          for (int w = 0; w < workers; ++w) {
            fill_gradient(gradient, 21, w, static_cast<std::uint64_t>(s));
            const auto& prev = s > 0 ? device[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(w)].residual
                                     : std::vector<float>(n, 0.0f);
            for (std::size_t i = 0; i < n; ++i) in += static_cast<double>(gradient[i]) + prev[i];
            const Observed& d = device[static_cast<std::size_t>(s)][static_cast<std::size_t>(w)];
            out += std::accumulate(d.residual.begin(), d.residual.end(), 0.0);
          }
          const auto& avg = device[static_cast<std::size_t>(s)][0].average;
          out += static_cast<double>(workers) * std::accumulate(avg.begin(), avg.end(), 0.0);
          EXPECT_NEAR(in, out, 1e-4 * (1.0 + std::abs(in))) << "step " << s;
        }
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 7 * 30);
}

// The same values in every thread (torch's global generator is shared between the workers' threads).
std::vector<torch::Tensor> small_model() {
  std::vector<torch::Tensor> out;
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{7, 5}, {11}, {3, 2}}) {
    const auto n = static_cast<std::size_t>(std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
    out.push_back(tensor_of(test::synthetic(n, Distribution::normal, 4 + out.size())).view(shape).requires_grad_());
  }
  return out;
}

void set_gradients(std::vector<torch::Tensor>& parameters, int rank, std::uint64_t step) {
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    std::vector<float> g(static_cast<std::size_t>(parameters[i].numel()));
    fill_gradient(g, 31 + i, rank, step);
    parameters[i].mutable_grad() = tensor_of(g).view(parameters[i].sizes());
  }
}

// The trainer's optimizers on the device path (what --device cuda runs) and on the host engine,
// from the same parameters and gradients: the same parameters after several steps (to a float
// rounding), and a checkpoint of one resumes on the other.
TEST(DeviceTrainingOptimizer, StepsAsTheHostOptimizerDoes) {
  struct Case {
    std::string optimizer;
    SgdConfig sgd;
  };
  const std::vector<Case> cases = {
      {"sgd", {.momentum = 0.9, .weight_decay = 1e-3}},
      {"sgd", {.momentum = 0.9, .nesterov = true, .weight_decay = 1e-3, .per_layer = true}},
      {"sgd", {.momentum = 0.9, .weight_decay = 1e-3, .momentum_correction = true}},
      {"adam", {.momentum = 0.0, .weight_decay = 1e-3}},
      {"adamw", {.momentum = 0.0, .weight_decay = 1e-2}},
  };
  const int workers = 3, steps = 4;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.optimizer + (c.sgd.momentum_correction ? " momentum correction" : "") +
                 (c.sgd.nesterov ? " nesterov per layer" : ""));
    std::vector<std::vector<float>> host(workers), device(workers);
    transport::run_local_workers(workers, [&](transport::Transport& t) {
      auto a = small_model(), b = small_model();
      const auto config = config_for("topk", "gtopk-rd");
      auto on_host = make_training_optimizer(c.optimizer, t, a, {"w", "b", "v"}, config, c.sgd, false);
      auto on_device = make_training_optimizer(c.optimizer, t, b, {"w", "b", "v"}, config, c.sgd, true);
      for (int s = 0; s < steps; ++s) {
        set_gradients(a, t.rank(), static_cast<std::uint64_t>(s));
        set_gradients(b, t.rank(), static_cast<std::uint64_t>(s));
        on_host->step(static_cast<std::uint64_t>(s), 0.1);
        on_device->step(static_cast<std::uint64_t>(s), 0.1);
      }
      // The device path's checkpoint, resumed on the host engine, steps as the device path goes on.
      Checkpoint saved;
      on_device->save(saved);
      auto c_model = small_model();
      std::vector<float> values(on_device->size());
      on_device->flat().gather_values(values);
      auto resumed = make_training_optimizer(c.optimizer, t, c_model, {"w", "b", "v"}, config, c.sgd, false);
      resumed->flat().scatter_values(values);
      resumed->load(saved);
      set_gradients(b, t.rank(), steps);
      set_gradients(c_model, t.rank(), steps);
      on_device->step(steps, 0.1);
      resumed->step(steps, 0.1);
      std::vector<float> h(on_host->size()), d(on_device->size()), r(resumed->size());
      on_host->flat().gather_values(h);
      on_device->flat().gather_values(d);
      resumed->flat().gather_values(r);
      for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(r[i], d[i], 1e-5f * (1.0f + std::abs(d[i]))) << i;
      host[static_cast<std::size_t>(t.rank())] = h;
      device[static_cast<std::size_t>(t.rank())] = floats_of(on_device->flat().values());
      // h is one step behind d: compare d with a host run of the same length below.
      host[static_cast<std::size_t>(t.rank())] = [&] {
        set_gradients(a, t.rank(), steps);
        on_host->step(steps, 0.1);
        std::vector<float> out(on_host->size());
        on_host->flat().gather_values(out);
        return out;
      }();
    });
    for (int w = 0; w < workers; ++w) {
      const auto& h = host[static_cast<std::size_t>(w)];
      const auto& d = device[static_cast<std::size_t>(w)];
      ASSERT_EQ(h.size(), d.size());
      for (std::size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(d[i], h[i], 1e-5f * (1.0f + std::abs(h[i]))) << "rank " << w << " entry " << i;
      EXPECT_EQ(d, device[0]) << "rank " << w << " differs from rank 0";
    }
  }
}

TEST(DeviceGradientAverager, NamesTheParameterOfANonFiniteGradient) {
  transport::run_local_workers(1, [&](transport::Transport& t) {
    DeviceGradientAverager averager(t, {{0, 10}, {10, 30}}, {"weight", "bias"}, config_for("topk", "allgather"), false,
                                    false, 0.0, torch::kCPU);
    torch::Tensor g = torch::zeros({30});
    g[17] = -std::numeric_limits<float>::infinity();
    try {
      averager.check_finite(g, 4);
      ADD_FAILURE() << "accepted an Inf";
    } catch (const InvalidData& e) {
      EXPECT_NE(std::string(e.what()).find("non-finite gradient (-inf) in parameter 'bias' at element 7, iteration 4"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace sparsgd::torch_layer::device_path_test
