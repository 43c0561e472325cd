// Bytes on the wire with compressed indices, message by message where the sets sent are known
// without running the merges: allgather forwards the selections themselves (any P), and at P = 2
// every gTop-k variant sends each rank's own selection once (the tree's root also sends the final
// set back, with a mask of the child's survivors).

#include <gtest/gtest.h>

#include <vector>

#include "sparsgd/collectives/gradient_exchange.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/index_codec.hpp"
#include "sparsgd/core/synthetic.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd {
namespace {

// A message of `set` with compressed indices, as core/wire.hpp lays it out.
std::uint64_t coded_message_bytes(const SparseVector& set, std::size_t mask_bits = 0) {
  const auto n = static_cast<std::uint32_t>(set.dim);
  return wire::kHeaderBytes + 4 + 4 * set.size() + index_codec::encoded_sizes(set.indices, n).best_bytes() +
         (mask_bits + 7) / 8;
}

struct Sent {
  SparseVector selection;
  SparseVector sum;
  std::uint64_t bytes = 0, messages = 0;
};

std::vector<Sent> exchange_once(const std::string& aggregator, int workers, std::size_t n, double density) {
  collectives::ExchangeConfig config;
  config.compressor.name = "topk";
  config.aggregator = aggregator;
  config.density = density;
  config.index_coding = wire::IndexCoding::compressed;
  std::vector<Sent> sent(static_cast<std::size_t>(workers));
  transport::run_local_workers(workers, [&](transport::Transport& t) {
    collectives::GradientExchange exchange(t, n, config);
    std::vector<float> gradient(n);
    fill_gradient(gradient, 5, t.rank(), 0);
    const auto before = t.counters();
    const collectives::Aggregation& result = exchange.exchange(gradient, 0);
    Sent& mine = sent[static_cast<std::size_t>(t.rank())];
    mine.bytes = t.counters().bytes_sent - before.bytes_sent;
    mine.messages = t.counters().messages_sent - before.messages_sent;
    mine.selection = exchange.last_selection();
    mine.sum = result.sum;
  });
  return sent;
}

TEST(CompressedTraffic, AllgatherSendsEachSelectionCodedOncePerForward) {
  for (const int p : {2, 3, 5, 8, 13}) {
    for (const double density : {0.001, 0.01, 0.3}) {
      const std::vector<Sent> sent = exchange_once("allgather", p, 30011, density);
      for (int r = 0; r < p; ++r) {
        // Bruck: in the round at distance d, rank r forwards the blocks of ranks r .. r + count - 1.
        std::uint64_t want = 0, held = 1, messages = 0;
        for (int dist = 1; dist < p; dist *= 2, ++messages) {
          const std::uint64_t count = std::min<std::uint64_t>(static_cast<std::uint64_t>(dist), p - held);
          for (std::uint64_t i = 0; i < count; ++i) {
            want += coded_message_bytes(sent[(static_cast<std::size_t>(r) + i) % static_cast<std::size_t>(p)].selection);
          }
          held += count;
        }
        EXPECT_EQ(sent[static_cast<std::size_t>(r)].bytes, want) << "P = " << p << ", density " << density << ", rank " << r;
        EXPECT_EQ(sent[static_cast<std::size_t>(r)].messages, messages);
      }
    }
  }
}

TEST(CompressedTraffic, TwoRanksOfGtopkSendTheirSelectionsCoded) {
  for (const double density : {0.001, 0.01, 0.3}) {
    for (const char* aggregator : {"gtopk-rd", "gtopk"}) {
      const std::vector<Sent> sent = exchange_once(aggregator, 2, 30011, density);
      const std::string where = std::string(aggregator) + ", density " + std::to_string(density);
      EXPECT_EQ(sent[1].bytes, coded_message_bytes(sent[1].selection)) << where;
      if (std::string(aggregator) == "gtopk-rd") {
        EXPECT_EQ(sent[0].bytes, coded_message_bytes(sent[0].selection)) << where;
      } else {  // the root sends the final set with a mask of rank 1's entries
        EXPECT_EQ(sent[0].bytes, coded_message_bytes(sent[0].sum, sent[1].selection.size())) << where;
      }
    }
  }
}

// At the density of the gTop-k paper the packed gaps take about 13 bits an index, not 32: at most
// the 5.75 bytes a pair the design asks for, above the entropy bound.
TEST(CompressedTraffic, AboutThirteenBitsAnIndexAtDensityOneInAThousand) {
  const std::vector<Sent> sent = exchange_once("gtopk-rd", 2, 2000003, 0.001);
  const double pairs = static_cast<double>(sent[0].selection.size());
  const double bytes_per_pair = static_cast<double>(sent[0].bytes - wire::kHeaderBytes - 4) / pairs;
  EXPECT_LE(bytes_per_pair, 5.75);
  EXPECT_GT(bytes_per_pair, 5.3);  // the entropy bound: 4 + log2(e * 1000) / 8 = 5.43
}

}  // namespace
}  // namespace sparsgd
