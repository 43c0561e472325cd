#pragma once
// One descriptor per aggregator, in the spirit of nccl-tests' testColl: its name, wire id, factory,
// serial reference, closed-form cost and traffic, memory footprint and properties, in the file that
// implements it (src/collectives/aggregators/). The factory, CLI help and validation, the cost
// model, auto's candidates, bench comm, the trainer, the Python package and the tests read the
// descriptor, so adding an aggregator means one new file and one line in the registry
// (src/collectives/aggregators/registry.cpp).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/core/wire.hpp"

namespace sparsgd::collectives {

// What an aggregator's design means for the code around it.
struct AggregatorProperties {
  // Its messages carry indices, so compressed indices apply (dense and randk-shared send values
  // only).
  bool sends_indices = true;
  // The algorithm fixes the order of every float sum and the reference takes the same order, so
  // results compare bitwise; otherwise within the rounding bound of sums_agree.
  bool exact_sum_order = true;
  // Every worker must select the same indices (random-k with a shared seed).
  bool needs_shared_indices = false;
  // The result is n floats (Aggregation::dense_sum), not a sparse sum.
  bool dense_result = false;
  // Another aggregator forms each sum (auto): the reference, the traffic and the sum order are
  // that one's (Aggregation::method names it).
  bool delegates = false;
  // A message may carry several workers' selections (allgather forwards what it has received), so
  // a rank sends up to P - 1 sets, each with its own index framing, in fewer messages.
  bool forwards_sets = false;
  // auto's candidates are the aggregators with a rank here, 1 first: on equal closed-form costs
  // the lower rank wins (0: not a candidate).
  int auto_rank = 0;
};

// A property by name, for the front ends that print or return them all (flags as 0 or 1).
struct PropertyValue {
  std::string_view name;
  int value = 0;
  bool flag = true;
};
std::vector<PropertyValue> property_values(const AggregatorProperties& properties);

// One aggregation's cost under the alpha-beta model (alpha per message, beta per byte).
struct CommCost {
  double seconds = 0.0;         // on the critical path
  double messages = 0.0;        // latency terms on the critical path
  double bytes_per_worker = 0;  // bytes the busiest worker sends
};

struct CostQuery {
  int workers = 1;
  std::size_t n = 0;
  std::size_t k = 0;  // entries in every worker's selection
  wire::IndexCoding coding = wire::IndexCoding::raw;
  double alpha_seconds = 0.0;
  double seconds_per_byte = 0.0;
  // A sparse message of k pairs with a mask of mask_bits bits: exact for raw indices; with
  // compressed ones, the codec's expected size for a uniformly random k-subset of n (its CPU time
  // is not charged).
  double sparse_message_bytes(std::size_t mask_bits = 0) const;
};

// What one rank sends in one aggregation.
struct RankTraffic {
  std::uint64_t bytes = 0;
  std::uint64_t messages = 0;
};

// Memory in arrays of n floats and in sets of k (index, value) pairs, with a part that grows with
// the worker count: for estimates made before a run allocates (bench comm).
struct Footprint {
  double arrays = 0.0;
  double pairs = 0.0;
  double pairs_per_worker = 0.0;
  // Arrays of n divided among the workers (Ok-Topk's regions partition the index space): this
  // many in all, however many workers a process holds. Not in bytes(), which is one worker's.
  double arrays_shared = 0.0;
  // Receives of up to k pairs each that one worker has posted at once (never more than the job's
  // other workers): they hold buffers only on transports that post into buffers of their own (MPI's
  // staging buffers).
  double posted_receives = 0.0;
  // One worker's buffers; with posted_buffers, those of its posted receives too.
  double bytes(std::size_t n, std::size_t k, int workers, bool posted_buffers = false) const;
  double shared_bytes(std::size_t n) const;
  // Adds the buffers of another aggregator that the same worker holds beside these (auto's
  // candidates): the gradient and the residual, 2 arrays, are the worker's, counted once.
  void hold_beside(const Footprint& other);
};

struct AggregatorDescriptor {
  std::string_view name;
  std::uint32_t wire_id = 0;  // in every message header, so that ranks running different ones fail
  std::string_view summary;   // one line for help texts: what travels and how the sum is formed
  AggregatorProperties properties;
  // Message tags it uses, a block from the one allocator (src/collectives/blocks/tags.hpp).
  int tag_count = 0;
  std::unique_ptr<Aggregator> (*make)(const AggregatorOptions& options) = nullptr;
  // The serial model of its semantics (reference.hpp), from every worker's selection.
  ReferenceAggregation (*reference)(const std::vector<SparseVector>& selections, std::size_t k) = nullptr;
  // Closed form on the critical path, every selection holding k entries.
  CommCost (*cost)(const CostQuery& query) = nullptr;
  // Exactly what `rank` sends with raw indices when every selection holds k entries; null where
  // that depends on where the entries lie (then traffic_of).
  RankTraffic (*traffic)(int workers, int rank, std::size_t n, std::size_t k) = nullptr;
  // Exactly what `rank` sends with raw indices in a first call on these selections; null where
  // traffic answers for any selections of k entries.
  RankTraffic (*traffic_of)(const std::vector<SparseVector>& selections, std::size_t k, int rank) = nullptr;
  Footprint worker_memory;     // one worker's buffers (gradient and residual included)
  Footprint reference_memory;  // its serial reference, for all workers
  Footprint result_memory;     // one aggregation's result, kept for verification
};

// The factory of an aggregator class: constructed from the options where it takes them.
template <class T>
std::unique_ptr<Aggregator> construct(const AggregatorOptions& options) {
  if constexpr (std::is_constructible_v<T, const AggregatorOptions&>) {
    return std::make_unique<T>(options);
  } else {
    return std::make_unique<T>();
  }
}

// Every aggregator, in the order help texts list them.
const std::vector<const AggregatorDescriptor*>& aggregator_descriptors();

// Throws InvalidArgument naming the known aggregators.
const AggregatorDescriptor& find_aggregator(std::string_view name);

// "dense, allgather, gtopk, gtopk-rd, oktopk or randk-shared", for help texts and errors; with a
// predicate, only those it accepts.
std::string aggregator_choices();
std::string aggregator_choices(bool (*accept)(const AggregatorDescriptor&));

// --aggregator's help: each name with its summary (auto's with its candidates).
std::string aggregator_help();

// The scaling table's methods (sim/scaling.hpp): every aggregator with a closed form of its own
// over each worker's own selection (not delegating, not needing shared indices), in registry order.
std::vector<const AggregatorDescriptor*> modelled_aggregators();

}  // namespace sparsgd::collectives
