#pragma once
// The merge step of gTop-k: add a partner's sparse set into this rank's own (equal indices: values
// add, own + partner), then keep the k largest |value| (ties by lower index). It also says where
// each input entry went, which the aggregators use to track what survives.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::collectives {

inline constexpr std::int32_t kDropped = -1;

class TopkMerger {
 public:
  // out = topk_k(own (+) incoming). own_position[i] / incoming_position[i]: the position in out of
  // the pair holding entry i, or kDropped. `out` must not alias the inputs.
  void merge(const SparseVector& own, const SparseVector& incoming, std::size_t k, SparseVector& out,
             std::vector<std::int32_t>& own_position, std::vector<std::int32_t>& incoming_position);

 private:
  SparseVector union_;
  std::vector<std::uint32_t> union_keys_;
  std::vector<std::int32_t> union_to_out_;
  std::vector<std::uint32_t> selected_;
  std::vector<std::uint32_t> scratch_;
};

// Entries that joined a rank's current set, and their position in it (or kDropped).
struct TrackedEntries {
  std::vector<std::int32_t> position;
  // After a merge: follow each live entry to its new position through the merge's own_position.
  void follow(const std::vector<std::int32_t>& own_position) {
    for (std::int32_t& p : position) {
      if (p != kDropped) p = own_position[static_cast<std::size_t>(p)];
    }
  }
};

}  // namespace sparsgd::collectives
