#include "collectives/sparse_merge.hpp"

#include <algorithm>

#include "sparsgd/select/magnitude.hpp"

namespace sparsgd::collectives {

void TopkMerger::merge(const SparseVector& own, const SparseVector& incoming, std::size_t k, SparseVector& out,
                       std::vector<std::int32_t>& own_position, std::vector<std::int32_t>& incoming_position) {
  const std::size_t a_size = own.size();
  const std::size_t b_size = incoming.size();
  union_.dim = own.dim;
  union_.resize(a_size + b_size);
  own_position.resize(a_size);
  incoming_position.resize(b_size);
  // Union by index; own_position / incoming_position first hold union positions. Branch-free
  // body: which side advances is data, and the interleaving of two index sets is random enough
  // that a branch would mispredict about half the time. A position written for an entry that
  // does not advance is overwritten when it does.
  std::size_t a = 0, b = 0, u = 0;
  const std::uint32_t* ai = own.indices.data();
  const std::uint32_t* bi = incoming.indices.data();
  const float* av = own.values.data();
  const float* bv = incoming.values.data();
  std::uint32_t* ui = union_.indices.data();
  float* uv = union_.values.data();
  std::int32_t* ap = own_position.data();
  std::int32_t* bp = incoming_position.data();
  while (a < a_size && b < b_size) {
    const std::uint32_t ia = ai[a];
    const std::uint32_t ib = bi[b];
    const bool take_a = ia <= ib;
    const bool take_b = ib <= ia;
    const float va = av[a];
    const float vb = bv[b];
    // own + incoming when both hold the index (own first, as the reference does).
    const float both = va + vb;
    uv[u] = take_a ? (take_b ? both : va) : vb;
    ui[u] = take_a ? ia : ib;
    ap[a] = static_cast<std::int32_t>(u);
    bp[b] = static_cast<std::int32_t>(u);
    a += take_a;
    b += take_b;
    ++u;
  }
  for (; a < a_size; ++a, ++u) {
    union_.indices[u] = own.indices[a];
    union_.values[u] = own.values[a];
    own_position[a] = static_cast<std::int32_t>(u);
  }
  for (; b < b_size; ++b, ++u) {
    union_.indices[u] = incoming.indices[b];
    union_.values[u] = incoming.values[b];
    incoming_position[b] = static_cast<std::int32_t>(u);
  }
  union_.resize(u);
  out.dim = own.dim;
  if (u <= k) {
    // Everything survives: the union is the result and positions stay as they are.
    out.indices.assign(union_.indices.begin(), union_.indices.end());
    out.values.assign(union_.values.begin(), union_.values.end());
    return;
  }
  // The k largest of the union: a histogram select over magnitude keys, then a branch-free pass
  // that also records where each union entry went.
  union_keys_.resize(u);
  for (std::size_t i = 0; i < u; ++i) union_keys_[i] = select::magnitude_key(union_.values[i]);
  const select::KthKey kth = select::kth_largest_of_keys(union_keys_, k, scratch_);
  selected_.resize(k);
  union_to_out_.resize(u);
  select::emit_top_positions(union_keys_, kth, k, selected_.data(), union_to_out_);
  out.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    out.indices[i] = union_.indices[selected_[i]];
    out.values[i] = union_.values[selected_[i]];
  }
  for (std::int32_t& p : own_position) p = union_to_out_[static_cast<std::size_t>(p)];
  for (std::int32_t& p : incoming_position) p = union_to_out_[static_cast<std::size_t>(p)];
}

}  // namespace sparsgd::collectives
