#include "sparsgd/sim/cost_model.hpp"

#include <cmath>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/index_codec.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::sim {
namespace {

int ceil_log2(int p) {
  int rounds = 0;
  while ((1 << rounds) < p) ++rounds;
  return rounds;
}

// A sparse message of k pairs (and a mask of mask_bits bits) in that coding.
double sparse_bytes(std::size_t n, std::size_t k, std::size_t mask_bits, wire::IndexCoding coding) {
  const auto raw = static_cast<double>(wire::sparse_message_bytes(k, mask_bits));
  if (coding == wire::IndexCoding::raw) return raw;
  const double framing = static_cast<double>(wire::max_sparse_message_bytes(0, 0, coding) - wire::sparse_message_bytes(0)) -
                         static_cast<double>(index_codec::kPrefixBytes);
  return raw - 4.0 * static_cast<double>(k) + framing + index_codec::expected_encoded_bytes(k, static_cast<std::uint32_t>(n));
}

}  // namespace

CommCost aggregation_cost(const std::string& aggregator, int workers, std::size_t n, std::size_t k,
                          const transport::NetworkSpec& network, wire::IndexCoding coding) {
  SPARSGD_ENFORCE(workers >= 1, "workers must be at least 1");
  SPARSGD_ENFORCE(network.enabled(), "the cost model needs a network with a bandwidth");
  const double alpha = network.alpha_seconds;
  const double beta = 1.0 / network.bytes_per_second;
  const int p = workers;
  const bool sends_no_indices = aggregator == "dense" || aggregator == "randk-shared";
  SPARSGD_ENFORCE(coding == wire::IndexCoding::raw || !sends_no_indices,
                  "cost model: the " << aggregator << " aggregator sends no indices to compress");
  const double pairs = sparse_bytes(n, k, 0, coding);
  CommCost cost;
  if (p == 1) return cost;
  if (aggregator == "dense" || aggregator == "randk-shared") {
    const std::size_t values = aggregator == "dense" ? n : k;
    const double chunk = static_cast<double>(wire::dense_message_bytes((values + static_cast<std::size_t>(p) - 1) /
                                                                       static_cast<std::size_t>(p)));
    cost.messages = 2.0 * (p - 1);
    cost.seconds = cost.messages * (alpha + chunk * beta);
    cost.bytes_per_worker = cost.messages * chunk;
  } else if (aggregator == "allgather") {
    cost.messages = ceil_log2(p);
    cost.bytes_per_worker = (p - 1) * pairs;
    cost.seconds = cost.messages * alpha + cost.bytes_per_worker * beta;
  } else if (aggregator == "gtopk") {
    const int rounds = ceil_log2(p);
    const double down = sparse_bytes(n, k, k, coding);
    cost.messages = 2.0 * rounds;
    cost.seconds = rounds * (alpha + pairs * beta) + rounds * (alpha + down * beta);
    cost.bytes_per_worker = rounds * down;  // the root sends one broadcast message per round
  } else if (aggregator == "gtopk-rd") {
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    const int rounds = ceil_log2(p2);
    cost.messages = rounds;
    cost.seconds = rounds * (alpha + pairs * beta);
    cost.bytes_per_worker = rounds * pairs;
    if (p2 != p) {
      const double down = sparse_bytes(n, k, k, coding);
      cost.messages += 2;
      cost.seconds += (alpha + pairs * beta) + (alpha + down * beta);
      cost.bytes_per_worker += down;
    }
  } else {
    throw InvalidArgument("cost model: unknown aggregator '" + aggregator + "'");
  }
  return cost;
}

}  // namespace sparsgd::sim
