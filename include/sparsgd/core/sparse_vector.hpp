#pragma once
// A sparse vector as structure of arrays: ascending uint32 indices and their float values, over a
// dense length `dim`. The wire format (count, indices, values) mirrors this layout.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparsgd {

struct SparseVector {
  std::size_t dim = 0;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;

  std::size_t size() const { return indices.size(); }
  bool empty() const { return indices.empty(); }
  void resize(std::size_t count) {
    indices.resize(count);
    values.resize(count);
  }
  void clear() {
    indices.clear();
    values.clear();
  }
  // Adds every entry into a dense array of length dim.
  void add_to(std::span<float> dense) const {
    for (std::size_t i = 0; i < indices.size(); ++i) dense[indices[i]] += values[i];
  }
};

// Ascending (index, value) pairs held elsewhere: a SparseVector, or a message buffer the entries
// are read from or written to in place.
struct SparseView {
  std::size_t dim = 0;
  std::span<const std::uint32_t> indices;
  std::span<const float> values;

  std::size_t size() const { return indices.size(); }
};

inline SparseView view_of(const SparseVector& v) { return {v.dim, v.indices, v.values}; }

}  // namespace sparsgd
