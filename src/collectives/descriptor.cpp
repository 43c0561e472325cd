// The cost query's and the footprint's arithmetic (descriptor.hpp), which every aggregator's
// closed form and memory estimate use.

#include "sparsgd/collectives/descriptor.hpp"

#include <algorithm>

#include "sparsgd/core/index_codec.hpp"

namespace sparsgd::collectives {

std::vector<PropertyValue> property_values(const AggregatorProperties& p) {
  return {{"sends_indices", p.sends_indices},       {"exact_sum_order", p.exact_sum_order},
          {"needs_shared_indices", p.needs_shared_indices}, {"dense_result", p.dense_result},
          {"delegates", p.delegates},               {"forwards_sets", p.forwards_sets},
          {"auto_rank", p.auto_rank, false}};
}

double CostQuery::sparse_message_bytes(std::size_t mask_bits) const {
  const auto raw = static_cast<double>(wire::sparse_message_bytes(k, mask_bits));
  if (coding == wire::IndexCoding::raw) return raw;
  // The coded message replaces 4 bytes an index by the code, and adds the code's length field.
  const double framing = static_cast<double>(wire::max_sparse_message_bytes(0, 0, coding) - wire::sparse_message_bytes(0)) -
                         static_cast<double>(index_codec::kPrefixBytes);
  return raw - 4.0 * static_cast<double>(k) + framing +
         index_codec::expected_encoded_bytes(k, static_cast<std::uint32_t>(n));
}

double Footprint::bytes(std::size_t n, std::size_t k, int workers, bool posted_buffers) const {
  const double posted = posted_buffers ? std::min(posted_receives, static_cast<double>(workers - 1)) : 0.0;
  return arrays * 4.0 * static_cast<double>(n) + (pairs + pairs_per_worker * workers + posted) * 8.0 * static_cast<double>(k);
}

void Footprint::hold_beside(const Footprint& other) {
  arrays += std::max(0.0, other.arrays - 2.0);
  pairs += other.pairs;
  pairs_per_worker += other.pairs_per_worker;
  arrays_shared += other.arrays_shared;
  posted_receives += other.posted_receives;
}

double Footprint::shared_bytes(std::size_t n) const { return arrays_shared * 4.0 * static_cast<double>(n); }

}  // namespace sparsgd::collectives
