#include "collectives/blocks/sparse_merge.hpp"

#include <algorithm>
#include <limits>

#include "collectives/blocks/merge_kernels.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/select/magnitude.hpp"
#include "sparsgd/select/topk.hpp"

namespace sparsgd::collectives {
namespace {

constexpr std::uint32_t kSentinel = std::numeric_limits<std::uint32_t>::max();  // above any index < n <= 2^32 - 1

// Selection keys are magnitude keys plus one, so that key 0 can mark an entry that must not be
// selected (the incoming copy of a shared index, whose value the own copy already holds).
constexpr std::uint32_t kExcluded = 0;
std::uint32_t selection_key(float value) { return select::magnitude_key(value) + 1; }

constexpr std::uint64_t kSentinelPair = std::numeric_limits<std::uint64_t>::max();

void resize_for_compaction(TopkMerger::Survivors& s, std::size_t n, bool positions) {
  const std::size_t slots = n + std::max(kCompactPadding, kMergePadding) + 1;
  if (s.pairs.size() < slots) s.pairs.resize(slots);
  if (positions && s.positions.size() < slots) s.positions.resize(slots);
}

}  // namespace

std::uint32_t TopkMerger::tie_cutoff(SelectionKeys own_keys, const float* own_values, const std::uint32_t* own_indices,
                                     SelectionKeys incoming_keys, const std::uint32_t* incoming_indices,
                                     const float* incoming_values, std::uint32_t threshold, std::size_t ties_taken) {
  // Only some of the entries at the threshold fit: the lowest indices among them, over both sides.
  if (ties_own_.size() < own_keys.count + kCompactPadding) ties_own_.resize(own_keys.count + kCompactPadding);
  if (ties_incoming_.size() < incoming_keys.count + kCompactPadding) {
    ties_incoming_.resize(incoming_keys.count + kCompactPadding);
  }
  const std::size_t from_own = indices_with_key(own_keys, own_values, own_indices, threshold, ties_own_.data());
  const std::size_t from_incoming =
      indices_with_key(incoming_keys, incoming_values, incoming_indices, threshold, ties_incoming_.data());
  ties_.resize(from_own + from_incoming);
  std::merge(ties_own_.begin(), ties_own_.begin() + static_cast<std::ptrdiff_t>(from_own), ties_incoming_.begin(),
             ties_incoming_.begin() + static_cast<std::ptrdiff_t>(from_incoming), ties_.begin());
  return ties_[ties_taken - 1];
}

std::size_t TopkMerger::merge(SparseView own, SparseView incoming, std::size_t k, const Allocate& allocate,
                              WritableInputs writable, Track track) {
  const std::size_t na = own.size();
  const std::size_t nb = incoming.size();

  // Rather than a merge of the full union, the own copy of a shared index takes the sum and the
  // incoming copy is excluded from the selection.
  shared_own_.resize(std::min(na, nb) + 1);
  shared_incoming_.resize(std::min(na, nb) + 1);
  const std::size_t shared = find_shared_indices(own.indices, incoming.indices, shared_own_.data(),
                                                 shared_incoming_.data());
  // Selection keys are made from the values on the fly. Where indices are shared, the own copy
  // holds the sum and the incoming copy is zeroed (in place where the caller allows it, else in
  // scratch copies of the values): a zero's key lies below every threshold but the lowest, so it is
  // never selected unless the k-th largest magnitude is itself zero, or everything fits; only then
  // are the keys stored, with the incoming copies' keys set to kExcluded.
  const float* own_values = own.values.data();
  const float* incoming_values = incoming.values.data();
  SelectionKeys own_keys{nullptr, na};
  SelectionKeys incoming_keys{nullptr, nb};
  if (shared > 0) {
    float* own_patch = writable.own;
    float* incoming_patch = writable.incoming;
    if (own_patch == nullptr) {
      own_values_.assign(own.values.begin(), own.values.end());
      own_patch = own_values_.data();
    }
    if (incoming_patch == nullptr) {
      incoming_values_.assign(incoming.values.begin(), incoming.values.end());
      incoming_patch = incoming_values_.data();
    }
    for (std::size_t s = 0; s < shared; ++s) {
      const std::uint32_t i = shared_own_[s];
      const std::uint32_t j = shared_incoming_[s];
      own_patch[i] += incoming_patch[j];  // own + incoming, as the reference adds
      incoming_patch[j] = 0.0f;
    }
    own_values = own_patch;
    incoming_values = incoming_patch;
  }
  auto store_keys = [&] {
    keys_.resize(na + nb);
    for (std::size_t i = 0; i < na; ++i) keys_[i] = selection_key(own_values[i]);
    for (std::size_t j = 0; j < nb; ++j) keys_[na + j] = selection_key(incoming_values[j]);
    for (std::size_t s = 0; s < shared; ++s) keys_[na + shared_incoming_[s]] = kExcluded;
    own_keys.keys = keys_.data();
    incoming_keys.keys = keys_.data() + na;
  };

  // The k largest of the union: everything if it fits, else by the k-th largest key, with ties
  // at that key taken by lower index.
  const std::size_t union_size = na + nb - shared;
  const std::size_t m = std::min(k, union_size);
  std::uint32_t threshold = kExcluded + 1;
  std::uint32_t cutoff = kSentinel;
  if (union_size > k) {
    select::KthKey kth = select::kth_largest_of_values({own_values, na}, {incoming_values, nb}, kExcluded + 1, k,
                                                       scratch_);
    if (shared > 0 && kth.key == kExcluded + 1) {
      store_keys();
      kth = select::kth_largest_of_keys(keys_, k, scratch_);
    }
    threshold = kth.key;
    const std::size_t ties_taken = k - kth.greater;
    if (kth.equal != ties_taken) {
      cutoff = tie_cutoff(own_keys, own_values, own.indices.data(), incoming_keys, incoming.indices.data(),
                          incoming_values, threshold, ties_taken);
    }
  } else if (shared > 0) {
    store_keys();
  }
  const bool track_incoming = track == Track::own_and_incoming;
  resize_for_compaction(own_survivors_, na, true);
  resize_for_compaction(incoming_survivors_, nb, track_incoming);
  Survivors& a = own_survivors_;
  Survivors& b = incoming_survivors_;
  const std::size_t ca = compact_selected(own_keys, own.indices.data(), own_values, threshold, cutoff, a.pairs.data(),
                                          a.positions.data());
  const std::size_t cb = compact_selected(incoming_keys, incoming.indices.data(), incoming_values, threshold, cutoff,
                                          b.pairs.data(), track_incoming ? b.positions.data() : nullptr);
  SPARSGD_ENFORCE_EQ(ca + cb, m, "gTop-k merge selected the wrong number of entries");
  std::fill_n(a.pairs.begin() + static_cast<std::ptrdiff_t>(ca), kMergePadding, kSentinelPair);
  std::fill_n(b.pairs.begin() + static_cast<std::ptrdiff_t>(cb), kMergePadding, kSentinelPair);

  const Destination out = allocate(m);
  merge_pairs(a.pairs.data(), ca, b.pairs.data(), cb, out.indices, out.values);
  last_out_indices_ = out.indices;
  last_own_ = na;
  last_own_survivors_ = ca;
  last_incoming_ = nb;
  last_shared_ = shared;
  last_size_ = m;
  last_tracked_incoming_ = track_incoming;
  return m;
}

void TopkMerger::positions(std::vector<std::int32_t>& own_position,
                           std::vector<std::int32_t>* incoming_position) const {
  SPARSGD_ENFORCE(incoming_position == nullptr || last_tracked_incoming_,
                  "TopkMerger::positions: the last merge did not track its incoming entries");
  own_position.assign(last_own_ + 1, kDropped);
  if (incoming_position == nullptr) {
    place_outputs<false>(own_position.data(), nullptr);
  } else {
    incoming_position->assign(last_incoming_ + 1, kDropped);
    place_outputs<true>(own_position.data(), incoming_position->data());
    incoming_position->resize(last_incoming_);
    // An incoming entry whose index own shares went into own's copy, wherever that went.
    for (std::size_t i = 0; i < last_shared_; ++i) {
      (*incoming_position)[shared_incoming_[i]] = own_position[shared_own_[i]];
    }
  }
  own_position.resize(last_own_);
}

template <bool kIncoming>
void TopkMerger::place_outputs(std::int32_t* own_slot, std::int32_t* incoming_slot) const {
  // The s-th output entry from own is own's s-th survivor (both ascend by index), and likewise for
  // incoming: an output entry is own's next survivor or else incoming's (own's survivors end with
  // the sentinel, whose index no entry has). Branch-free: an entry from the other side writes the
  // dummy slot past the end.
  const auto own_dummy = static_cast<std::uint32_t>(last_own_);
  const auto incoming_dummy = static_cast<std::uint32_t>(last_incoming_);
  const std::uint32_t* out = last_out_indices_;
  const std::uint64_t* a_pairs = own_survivors_.pairs.data();
  const std::uint32_t* a_positions = own_survivors_.positions.data();
  [[maybe_unused]] const std::uint32_t* b_positions = incoming_survivors_.positions.data();
  std::size_t s = 0, t = 0;
  for (std::size_t u = 0; u < last_size_; ++u) {
    const std::uint32_t from_own = out[u] == static_cast<std::uint32_t>(a_pairs[s] >> 32);
    const std::uint32_t take = 0u - from_own;
    own_slot[(a_positions[s] & take) | (own_dummy & ~take)] = static_cast<std::int32_t>(u);
    if constexpr (kIncoming) {
      incoming_slot[(incoming_dummy & take) | (b_positions[t] & ~take)] = static_cast<std::int32_t>(u);
      t += from_own ^ 1u;
    }
    s += from_own;
  }
}

void TopkMerger::own_survived(std::vector<std::uint8_t>& survived) const {
  survived.assign(last_own_, 0);
  const std::uint32_t* kept = own_survivors_.positions.data();
  for (std::size_t s = 0; s < last_own_survivors_; ++s) survived[kept[s]] = 1;
}

std::size_t TopkMerger::merge(SparseView own, SparseView incoming, std::size_t k, const Allocate& allocate,
                              std::vector<std::int32_t>& own_position, std::vector<std::int32_t>* incoming_position,
                              WritableInputs writable) {
  const std::size_t m = merge(own, incoming, k, allocate, writable,
                              incoming_position != nullptr ? Track::own_and_incoming : Track::own);
  positions(own_position, incoming_position);
  return m;
}

void TopkMerger::merge(SparseView own, SparseView incoming, std::size_t k, SparseVector& out,
                       std::vector<std::int32_t>& own_position, std::vector<std::int32_t>* incoming_position,
                       WritableInputs writable) {
  out.dim = own.dim;
  merge(
      own, incoming, k,
      [&out](std::size_t m) {
        out.resize(m);
        return Destination{out.indices.data(), out.values.data()};
      },
      own_position, incoming_position, writable);
}

}  // namespace sparsgd::collectives
