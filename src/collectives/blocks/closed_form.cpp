#include "collectives/blocks/closed_form.hpp"

#include "collectives/blocks/aggregator_support.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::collectives::closed_form {

int ceil_log2(int p) {
  int rounds = 0;
  while ((1 << rounds) < p) ++rounds;
  return rounds;
}

int power_of_two_floor(int p) {
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  return p2;
}

RankTraffic ring_traffic(std::size_t values, int workers, int rank) {
  RankTraffic t;
  if (workers == 1) return t;
  const auto chunk_bytes = [&](int c) {
    const int chunk = ((c % workers) + workers) % workers;
    const auto [begin, end] = ring_chunk(values, workers, chunk);
    return wire::dense_message_bytes(end - begin);
  };
  // Reduce-scatter: in step s rank r sends its partial sum of chunk r - s; allgather: of r + 1 - s.
  for (int s = 0; s < workers - 1; ++s) t.bytes += chunk_bytes(rank - s) + chunk_bytes(rank + 1 - s);
  t.messages = 2 * static_cast<std::uint64_t>(workers - 1);
  return t;
}

CommCost ring_cost(std::size_t values, const CostQuery& q) {
  CommCost cost;
  if (q.workers == 1) return cost;
  const auto p = static_cast<std::size_t>(q.workers);
  const auto chunk = static_cast<double>(wire::dense_message_bytes((values + p - 1) / p));
  cost.messages = 2.0 * (q.workers - 1);
  cost.seconds = cost.messages * (q.alpha_seconds + chunk * q.seconds_per_byte);
  cost.bytes_per_worker = cost.messages * chunk;
  return cost;
}

}  // namespace sparsgd::collectives::closed_form
