// auto: the choice is the candidate the closed forms find cheapest (dense where a sparse sum
// would cost more, SparCML's switch), the ping-pong recovers a network's alpha and beta and every
// rank gets the same fit, and an exchange records what it chose.

#include "sparsgd/collectives/auto_select.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::collectives {
namespace {

NetworkEstimate estimate_of(const std::string& spec) {
  const transport::NetworkSpec s = transport::parse_network(spec);
  return {s.alpha_seconds, 1.0 / s.bytes_per_second, true, false};
}

TEST(AutoSelect, ChoosesTheCheapestCandidateByTheClosedForms) {
  std::set<std::string_view> chosen;
  for (const std::string spec : {"paper-1gbe", "10gbe", "alpha=1e-6,bw=1e11"}) {
    const NetworkEstimate net = estimate_of(spec);
    for (int p : {1, 2, 3, 4, 32, 256}) {
      for (const std::size_t n : {std::size_t{1'000'000}, std::size_t{25'000'000}}) {
        for (double density : {0.001, 0.01, 0.75}) {
          const std::size_t k = k_from_density(n, density);
          CostQuery q;
          q.workers = p;
          q.n = n;
          q.k = k;
          q.alpha_seconds = net.alpha_seconds;
          q.seconds_per_byte = net.seconds_per_byte;
          double best = std::numeric_limits<double>::infinity();
          for (const std::string_view name : auto_candidates()) best = std::min(best, find_aggregator(name).cost(q).seconds);
          const std::string_view choice = cheapest_aggregator(p, n, k, wire::IndexCoding::raw, net);
          EXPECT_EQ(find_aggregator(choice).cost(q).seconds, best) << spec << " P=" << p << " n=" << n << " d=" << density;
          EXPECT_EQ(find_aggregator("auto").cost(q).seconds, best);
          chosen.insert(choice);
        }
      }
    }
  }
  // Across these networks and sizes each of dense and the sparse methods wins somewhere.
  EXPECT_TRUE(chosen.count("dense")) << "a dense allreduce never won, even at density 0.75";
  EXPECT_TRUE(chosen.count("gtopk-rd"));
  EXPECT_GE(chosen.size(), 3u);
  // SparCML's switch: at density 0.75 on 32 workers the dense allreduce is cheaper (Ok-Topk's
  // split and gather move about 2k pairs, 16k bytes, a ring 8n); at 0.001 not.
  const NetworkEstimate ten = estimate_of("10gbe");
  EXPECT_EQ(cheapest_aggregator(32, 1'000'000, 750'000, wire::IndexCoding::raw, ten), "dense");
  EXPECT_NE(cheapest_aggregator(32, 1'000'000, 1'000, wire::IndexCoding::raw, ten), "dense");
}

// On a simulated network the ping-pong, timed on the transport's clock, finds the network's own
// alpha and beta; every rank gets rank 0's fit.
TEST(AutoSelect, PingPongRecoversASimulatedNetwork) {
  for (int p : {2, 3, 5}) {
    std::vector<NetworkEstimate> fits(static_cast<std::size_t>(p));
    transport::run_local_workers(p, [&](transport::Transport& t) {
      transport::SimulatedNetwork simulated(t, transport::parse_network("alpha=0.002,bw=80000000"));
      fits[static_cast<std::size_t>(t.rank())] = measure_network(simulated);
    });
    for (const NetworkEstimate& fit : fits) {
      EXPECT_TRUE(fit.known && fit.measured);
      EXPECT_EQ(fit.alpha_seconds, fits[0].alpha_seconds);
      EXPECT_EQ(fit.seconds_per_byte, fits[0].seconds_per_byte);
    }
    // Beyond the model, each one-way time carries the CPU time of the calls (charged as compute).
    EXPECT_NEAR(fits[0].alpha_seconds, 0.002, 0.0002) << "P=" << p;
    EXPECT_NEAR(fits[0].seconds_per_byte, 1e-7, 0.05e-7) << "P=" << p;
  }
  transport::run_local_workers(1, [&](transport::Transport& t) {
    const NetworkEstimate alone = measure_network(t);
    EXPECT_TRUE(alone.known);
    EXPECT_EQ(alone.alpha_seconds, 0.0);
  });
}

// Unknown network: the first exchange measures it; every rank chooses the same, records it, and
// the choice is what cheapest_aggregator says for the fit.
TEST(AutoSelect, AnExchangeMeasuresChoosesAndRecords) {
  const int p = 4;
  const std::size_t n = 20011;
  ExchangeConfig config;
  config.compressor.name = "topk";
  config.aggregator = "auto";
  config.density = 0.01;
  std::vector<std::string> methods(p);
  std::vector<std::string> expected(p);
  transport::run_local_workers(p, [&](transport::Transport& t) {
    GradientExchange exchange(t, n, config);
    std::vector<float> gradient(n);
    fill_gradient(gradient, 3, t.rank(), 0);
    const Aggregation& result = exchange.exchange(gradient, 0);
    methods[static_cast<std::size_t>(t.rank())] = std::string(result.method);
    const AutoDecision* decision = auto_decision(exchange.aggregator());
    ASSERT_NE(decision, nullptr);
    EXPECT_TRUE(decision->network.measured);
    EXPECT_EQ(decision->last_choice, result.method);
    expected[static_cast<std::size_t>(t.rank())] =
        std::string(cheapest_aggregator(p, n, exchange.k(), wire::IndexCoding::raw, decision->network));
  });
  for (int r = 0; r < p; ++r) {
    EXPECT_FALSE(methods[static_cast<std::size_t>(r)].empty());
    EXPECT_EQ(methods[static_cast<std::size_t>(r)], methods[0]);
    EXPECT_EQ(methods[static_cast<std::size_t>(r)], expected[static_cast<std::size_t>(r)]);
  }
  EXPECT_EQ(auto_decision(*make_aggregator("gtopk-rd")), nullptr);
}

}  // namespace
}  // namespace sparsgd::collectives
