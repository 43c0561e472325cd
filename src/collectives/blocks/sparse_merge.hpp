#pragma once
// The merge step of gTop-k: add a partner's sparse set into this rank's own (equal indices: values
// add, own + partner), then keep the k largest |value| (ties by lower index). It also says where
// each input entry went, which the aggregators use to track what survives.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/blocks/merge_kernels.hpp"
#include "sparsgd/core/sparse_vector.hpp"

namespace sparsgd::collectives {

inline constexpr std::int32_t kDropped = -1;

// The inputs' values where TopkMerger::merge may overwrite them (at shared indices: own's with the
// sum, incoming's with zero), to save copying them; null where it may not.
struct WritableInputs {
  float* own = nullptr;       // own.values.data() made writable, or null
  float* incoming = nullptr;  // incoming.values.data() made writable, or null
};

class TopkMerger {
 public:
  // Where the result goes: called once with its size m, returns room for m entries.
  struct Destination {
    std::uint32_t* indices;
    float* values;
  };
  using Allocate = std::function<Destination(std::size_t m)>;

  // Which inputs' entries positions() must be able to place afterwards.
  enum class Track { own, own_and_incoming };

  // Writes topk_k(own (+) incoming), ascending by index, where allocate(m) says, and returns m. Both
  // inputs ascending; the result must not overlap them. Where each input entry went is left for
  // positions(), so that a caller can work it out while its next message is in flight.
  std::size_t merge(SparseView own, SparseView incoming, std::size_t k, const Allocate& allocate,
                    WritableInputs writable = {}, Track track = Track::own);
  // For the last merge: own_position[i] / (*incoming_position)[i], the position in the result of
  // the pair holding entry i, or kDropped. incoming_position only if that merge tracked incoming.
  // Reads the result's indices, which must be as the merge wrote them.
  void positions(std::vector<std::int32_t>& own_position, std::vector<std::int32_t>* incoming_position) const;
  // For the last merge, when only whether an own entry made the cut matters, not where it went:
  // survived[i] = 1 if own entry i did, else 0 (survived.size() = own's size).
  void own_survived(std::vector<std::uint8_t>& survived) const;

  // Both at once: merge, then positions (incoming tracked where incoming_position is given).
  std::size_t merge(SparseView own, SparseView incoming, std::size_t k, const Allocate& allocate,
                    std::vector<std::int32_t>& own_position, std::vector<std::int32_t>* incoming_position,
                    WritableInputs writable = {});
  // The same into a SparseVector (out.dim = own.dim).
  void merge(SparseView own, SparseView incoming, std::size_t k, SparseVector& out,
             std::vector<std::int32_t>& own_position, std::vector<std::int32_t>* incoming_position,
             WritableInputs writable = {});

  // One side's entries that make the cut, as pairs (index << 32 | value bits), and their positions
  // in that side's input (where tracked). The pairs are followed by kMergePadding sentinels above
  // every valid pair, so that the merge by index needs no bounds checks.
  struct Survivors {
    std::vector<std::uint64_t> pairs;
    std::vector<std::uint32_t> positions;
  };

 private:
  // positions()' walk over the last merge's output: writes each output position into the slot of
  // the own (and, with kIncoming, incoming) entry it holds; slots past the inputs' ends absorb the
  // writes of the side not taken.
  template <bool kIncoming>
  void place_outputs(std::int32_t* own_slot, std::int32_t* incoming_slot) const;
  std::uint32_t tie_cutoff(SelectionKeys own_keys, const float* own_values, const std::uint32_t* own_indices,
                           SelectionKeys incoming_keys, const std::uint32_t* incoming_indices,
                           const float* incoming_values, std::uint32_t threshold, std::size_t ties_taken);

  std::vector<std::uint32_t> shared_own_, shared_incoming_;
  std::vector<std::uint32_t> keys_, scratch_;
  // Where indices are shared and the inputs are not writable: copies of own's values with the sums
  // there and of incoming's with zeros there.
  std::vector<float> own_values_, incoming_values_;
  std::vector<std::uint32_t> ties_own_, ties_incoming_, ties_;
  Survivors own_survivors_, incoming_survivors_;
  // What positions() needs of the last merge besides the survivors: its sizes and where it wrote.
  std::size_t last_own_ = 0, last_incoming_ = 0, last_shared_ = 0, last_size_ = 0, last_own_survivors_ = 0;
  bool last_tracked_incoming_ = false;
  const std::uint32_t* last_out_indices_ = nullptr;
};

// Entries that joined a rank's current set, and their position in it (or kDropped).
struct TrackedEntries {
  std::vector<std::int32_t> position;
  // Entry i at position i: a rank's own selection as its current set.
  void start(std::size_t count) {
    position.resize(count);
    for (std::size_t i = 0; i < count; ++i) position[i] = static_cast<std::int32_t>(i);
  }
  // After a merge: follow each live entry to its new position through the merge's own_position.
  // Branch-free (about half the entries drop in a merge, so a branch would mispredict): a dropped
  // entry reads slot 0 and ORs in its all-ones kDropped.
  void follow(const std::vector<std::int32_t>& own_position) {
    std::int32_t* p = position.data();
    const std::int32_t* moves = own_position.data();
    const std::size_t count = position.size();
    if (own_position.empty()) {
      std::fill(position.begin(), position.end(), kDropped);
      return;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::int32_t dropped = p[i] >> 31;  // all ones for kDropped, else 0
      p[i] = moves[static_cast<std::uint32_t>(p[i] & ~dropped)] | dropped;
    }
  }
};

// flags[i] = 1 if entry i is live (position != kDropped) and survived[its position], else 0: the
// entries that live through one more merge, of which only that is asked. Branch-free: a dropped
// entry reads slot 0 and masks it out.
inline void mark_surviving(const std::vector<std::int32_t>& position, const std::vector<std::uint8_t>& survived,
                           std::uint8_t* flags) {
  const std::int32_t* p = position.data();
  const std::uint8_t* kept = survived.data();
  const std::size_t count = position.size();
  if (survived.empty()) {
    std::fill(flags, flags + count, std::uint8_t{0});
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::int32_t dropped = p[i] >> 31;  // all ones for kDropped, else 0
    flags[i] = static_cast<std::uint8_t>(kept[static_cast<std::uint32_t>(p[i] & ~dropped)] & ~dropped);
  }
}

// flags[i] = 1 if entry i is still live (position != kDropped), else 0. Through raw pointers: a
// byte store may alias anything, so a loop over vectors would reload their data pointers each time.
inline void mark_live(const std::vector<std::int32_t>& position, std::uint8_t* flags) {
  const std::int32_t* p = position.data();
  const std::size_t count = position.size();
  for (std::size_t i = 0; i < count; ++i) flags[i] = static_cast<std::uint8_t>(p[i] != kDropped);
}

}  // namespace sparsgd::collectives
