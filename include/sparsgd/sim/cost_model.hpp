#pragma once
// Closed-form alpha-beta cost of one aggregation, per algorithm as implemented here (message
// headers included), for comparison with the simulated and measured times.
//   alpha: per message (s); beta: per byte (s); a sparse pair is 8 bytes; every message carries a
//   20-byte header (core/wire.hpp).

#include <cstddef>
#include <string>

#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::sim {

struct CommCost {
  double seconds = 0.0;         // on the critical path
  double messages = 0.0;        // latency terms on the critical path
  double bytes_per_worker = 0;  // bytes the busiest worker sends
};

// dense: ring allreduce, 2(P-1) steps of ceil(n/P) floats.
// allgather: Bruck, ceil(log2 P) rounds, P-1 blocks of k pairs in all.
// gtopk: binomial reduce + broadcast, 2 ceil(log2 P) rounds of k pairs (+ a k-bit mask down).
// gtopk-rd: log2 P' rounds of k pairs, plus a fold and an unfold when P is not a power of two.
// randk-shared: ring allreduce of k floats.
// With compressed indices a sparse message of k pairs is charged the codec's expected size for
// a uniformly random k-subset of n (index_codec::expected_encoded_bytes) plus its framing; its
// CPU time is not charged (measured: bench/collectives_benchmarks, BM_Index*).
// Throws InvalidArgument for an unknown aggregator or for compressed indices with an aggregator
// that sends none.
CommCost aggregation_cost(const std::string& aggregator, int workers, std::size_t n, std::size_t k,
                          const transport::NetworkSpec& network,
                          wire::IndexCoding coding = wire::IndexCoding::raw);

}  // namespace sparsgd::sim
