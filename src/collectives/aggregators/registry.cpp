// The list of aggregators: one line per aggregator, in the order help texts name them. Each line
// names the descriptor function its file defines (NAME_aggregator(), src/collectives/aggregators/).

#include <algorithm>

#include "sparsgd/collectives/auto_select.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/descriptor_list.hpp"

#define SPARSGD_AGGREGATORS(X) \
  X(dense)                     \
  X(allgather)                 \
  X(gtopk)                     \
  X(gtopk_rd)                  \
  X(oktopk)                    \
  X(randk_shared)              \
  X(auto)

namespace sparsgd::collectives {

#define SPARSGD_DECLARE(id) const AggregatorDescriptor& id##_aggregator();
SPARSGD_AGGREGATORS(SPARSGD_DECLARE)
#undef SPARSGD_DECLARE

const std::vector<const AggregatorDescriptor*>& aggregator_descriptors() {
#define SPARSGD_ENTRY(id) &id##_aggregator(),
  static const std::vector<const AggregatorDescriptor*> all = {SPARSGD_AGGREGATORS(SPARSGD_ENTRY)};
#undef SPARSGD_ENTRY
  return all;
}

const AggregatorDescriptor& find_aggregator(std::string_view name) {
  if (const AggregatorDescriptor* d = find_descriptor(aggregator_descriptors(), name)) return *d;
  throw InvalidArgument("unknown aggregator '" + std::string(name) + "' (expected " + aggregator_choices() + ")");
}

std::string aggregator_choices() {
  return aggregator_choices([](const AggregatorDescriptor&) { return true; });
}

std::string aggregator_choices(bool (*accept)(const AggregatorDescriptor&)) {
  return descriptor_choices(aggregator_descriptors(), accept);
}

// auto's line also names its candidates.
std::string aggregator_help() {
  return descriptor_help<AggregatorDescriptor>(aggregator_descriptors(), [](const AggregatorDescriptor& d) {
    return d.properties.delegates ? " (candidates: " + name_list(auto_candidates(), " and ") + ")" : std::string();
  });
}

std::vector<const AggregatorDescriptor*> modelled_aggregators() {
  std::vector<const AggregatorDescriptor*> out;
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (!d->properties.delegates && !d->properties.needs_shared_indices) out.push_back(d);
  }
  return out;
}

}  // namespace sparsgd::collectives
