#pragma once
// What the built-in aggregators (one file each, with its descriptor) share.

#include <memory>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/wire.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

// The name and wire id an aggregator reports, read from its descriptor (Describe: the function its
// file defines), so that both are written once.
template <const AggregatorDescriptor& (*Describe)()>
class DescribedAggregator : public Aggregator {
 public:
  std::string name() const final { return std::string(Describe().name); }
  std::uint32_t wire_id() const final { return Describe().wire_id; }
};

// Checks the local selection against (n, k) before anything is sent.
void check_local_selection(const SparseVector& local, std::size_t k, std::size_t max_count, const char* who);

inline wire::Expectation expectation(const Aggregator& a, const SparseVector& local, std::size_t k,
                                     std::size_t capacity, int from_rank,
                                     wire::IndexCoding coding = wire::IndexCoding::raw) {
  static thread_local std::string name;
  name = a.name();
  return {a.wire_id(), static_cast<std::uint32_t>(local.dim), static_cast<std::uint32_t>(k), capacity, from_rank,
          name.c_str(), coding};
}

// Sums `values` over all ranks in place with a ring (reduce-scatter, then allgather): 2(P-1)
// messages of about size/P values each. `extra` travels in every header and must match on every
// rank (a checksum of what the values mean).
void ring_allreduce(transport::Transport& t, std::span<float> values, const wire::Expectation& expect,
                    std::uint32_t extra, int tag_base);

// Chunk c of a ring allreduce over `size` values among P ranks: [begin, end).
std::pair<std::size_t, std::size_t> ring_chunk(std::size_t size, int ranks, int c);

}  // namespace sparsgd::collectives
