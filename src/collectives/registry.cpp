// The list of aggregators: one line per aggregator, in the order help texts name them.

#include "sparsgd/collectives/descriptor.hpp"

#include <algorithm>

#include "collectives/algorithms.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/index_codec.hpp"

namespace sparsgd::collectives {

const std::vector<const AggregatorDescriptor*>& aggregator_descriptors() {
  static const std::vector<const AggregatorDescriptor*> all = {
      &dense_ring_descriptor(), &allgather_descriptor(), &gtopk_tree_descriptor(),
      &gtopk_rd_descriptor(),   &oktopk_descriptor(),        &randk_shared_descriptor(), &auto_descriptor(),
  };
  return all;
}

const AggregatorDescriptor& find_aggregator(std::string_view name) {
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d->name == name) return *d;
  }
  throw InvalidArgument("unknown aggregator '" + std::string(name) + "' (expected " + aggregator_choices() + ")");
}

std::string aggregator_choices() {
  const auto& all = aggregator_descriptors();
  std::string list;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i > 0) list += i + 1 == all.size() ? " or " : ", ";
    list += all[i]->name;
  }
  return list;
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
