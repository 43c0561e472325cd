#pragma once
// Closed-form alpha-beta cost of one aggregation, per algorithm as implemented here (message
// headers included), for comparison with the simulated and measured times.
//   alpha: per message (s); beta: per byte (s); a sparse pair is 8 bytes; every message carries a
//   20-byte header (core/wire.hpp).

#include <cstddef>
#include <string>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::sim {

using collectives::CommCost;

// Each aggregator's descriptor (collectives/descriptor.hpp) holds its closed form: e.g. dense is
// a ring allreduce, 2(P-1) steps of ceil(n/P) floats; gtopk-rd log2 P' rounds of k pairs, plus a
// fold and an unfold when P is not a power of two.
// With compressed indices a sparse message of k pairs is charged the codec's expected size for
// a uniformly random k-subset of n (index_codec::expected_encoded_bytes) plus its framing; its
// CPU time is not charged (measured: bench/collectives_benchmarks, BM_Index*).
// Throws InvalidArgument for an unknown aggregator or for compressed indices with an aggregator
// that sends none.
CommCost aggregation_cost(const std::string& aggregator, int workers, std::size_t n, std::size_t k,
                          const transport::NetworkSpec& network,
                          wire::IndexCoding coding = wire::IndexCoding::raw);

}  // namespace sparsgd::sim
