#include "sparsgd/collectives/aggregator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "collectives/blocks/aggregator_support.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/descriptor_list.hpp"
#include "core/wire_kernels.hpp"

namespace sparsgd::collectives {

const std::vector<std::string>& aggregator_names() {
  static const std::vector<std::string> names = descriptor_names(aggregator_descriptors());
  return names;
}

std::unique_ptr<Aggregator> make_aggregator(const std::string& name, const AggregatorOptions& options) {
  const AggregatorDescriptor& descriptor = find_aggregator(name);
  if (!descriptor.properties.sends_indices && options.index_coding != wire::IndexCoding::raw) {
    throw InvalidArgument("the " + name + " aggregator sends no indices, so they cannot be compressed: use " +
                          aggregator_choices([](const AggregatorDescriptor& d) { return d.properties.sends_indices; }) +
                          ", or raw indices");
  }
  return descriptor.make(options);
}

void check_local_selection(const SparseVector& local, std::size_t k, std::size_t max_count, const char* who) {
  validate_k(local.dim, k);
  SPARSGD_ENFORCE_EQ(local.indices.size(), local.values.size(), who << ": selection arrays differ in length");
  SPARSGD_ENFORCE_LE(local.size(), max_count, who << ": local selection holds more entries than allowed");
  // The vectorized check first (every aggregate call pays it); the loop that names the fault runs
  // only when there is one. Indices must fit the wire's 32 bits, so n is clamped to 2^32 - 1.
  const std::uint32_t* idx = local.indices.data();
  const std::size_t count = local.size();
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(local.dim, std::numeric_limits<std::uint32_t>::max()));
  if (wire::entries_valid(idx, local.values.data(), count, n)) return;
  const wire::EntryFault fault = wire::first_invalid_entry(idx, local.values.data(), count, n);
  const std::size_t i = fault.position;
  switch (fault.kind) {
    case wire::EntryFault::index_out_of_range:
      SPARSGD_ENFORCE_LT(static_cast<std::size_t>(idx[i]), local.dim, who << ": selected index out of range");
      break;
    case wire::EntryFault::not_ascending:
      SPARSGD_ENFORCE_LT(idx[i - 1], idx[i], who << ": selection must be ascending");
      break;
    case wire::EntryFault::not_finite:
      SPARSGD_ENFORCE(std::isfinite(local.values[i]), who << ": selected value at index " << idx[i] << " is not finite");
      break;
    case wire::EntryFault::none:
      break;
  }
}

}  // namespace sparsgd::collectives
