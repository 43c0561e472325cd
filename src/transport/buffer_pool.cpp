#include "sparsgd/transport/buffer_pool.hpp"

#include <algorithm>
#include <bit>
#include <iterator>
#include <optional>

namespace sparsgd::transport {
namespace {

// Past this a class's size would not fit in 64 bits: such a buffer is neither pooled nor rounded.
constexpr std::size_t kLargestPooledBytes = std::size_t{1} << 60;

// The largest class that a buffer of this capacity holds whole.
std::optional<std::size_t> class_held_by(std::size_t capacity) {
  if (capacity < BufferPool::kSmallestClassBytes || capacity > kLargestPooledBytes) return std::nullopt;
  const std::size_t index = BufferPool::class_for_request(capacity);
  return BufferPool::class_bytes(index) <= capacity ? index : index - 1;
}

}  // namespace

BufferPool::BufferPool(std::uint64_t epoch_takes) : epoch_takes_(std::max<std::uint64_t>(epoch_takes, 1)) {}

std::size_t BufferPool::class_bytes(std::size_t index) {
  if (index == 0) return kSmallestClassBytes;
  const std::size_t octave = 8 + (index - 1) / 4;
  const std::size_t step = (index - 1) % 4 + 1;
  return (std::size_t{1} << octave) + step * (std::size_t{1} << (octave - 2));
}

std::size_t BufferPool::class_for_request(std::size_t bytes) {
  if (bytes <= kSmallestClassBytes) return 0;
  // 2^octave < bytes <= 2^(octave + 1), cut into four steps of 2^(octave - 2).
  const auto octave = static_cast<std::size_t>(std::bit_width(bytes - 1)) - 1;
  const std::size_t step_bytes = std::size_t{1} << (octave - 2);
  const std::size_t step = (bytes - (std::size_t{1} << octave) + step_bytes - 1) / step_bytes;
  return (octave - 8) * 4 + step;
}

BufferPool::Buffer BufferPool::take(std::size_t bytes, std::vector<Buffer>& released) {
  if (bytes == 0) return {};
  if (++takes_in_epoch_ >= epoch_takes_) end_epoch(released);
  Buffer buffer;
  if (bytes > kLargestPooledBytes) {
    buffer.reserve(bytes);
    return buffer;
  }
  const std::size_t index = class_for_request(bytes);
  if (index < classes_.size() && !classes_[index].spares.empty()) {
    SizeClass& size_class = classes_[index];
    buffer = std::move(size_class.spares.back());
    size_class.spares.pop_back();
    size_class.low_water = std::min(size_class.low_water, size_class.spares.size());
    buffer.clear();
    return buffer;
  }
  buffer.reserve(class_bytes(index));
  return buffer;
}

void BufferPool::give(Buffer buffer) {
  const std::optional<std::size_t> index = class_held_by(buffer.capacity());
  if (!index) return;
  if (*index >= classes_.size()) classes_.resize(*index + 1);
  classes_[*index].spares.push_back(std::move(buffer));
}

void BufferPool::end_epoch(std::vector<Buffer>& released) {
  takes_in_epoch_ = 0;
  for (SizeClass& size_class : classes_) {
    // Spares that stayed in the pool all epoch were not needed: the oldest of them go.
    const auto unused = static_cast<std::ptrdiff_t>(size_class.low_water);
    std::move(size_class.spares.begin(), size_class.spares.begin() + unused, std::back_inserter(released));
    size_class.spares.erase(size_class.spares.begin(), size_class.spares.begin() + unused);
    size_class.low_water = size_class.spares.size();
  }
}

std::size_t BufferPool::spare_buffers() const {
  std::size_t count = 0;
  for (const SizeClass& size_class : classes_) count += size_class.spares.size();
  return count;
}

std::size_t BufferPool::spare_bytes() const {
  std::size_t bytes = 0;
  for (const SizeClass& size_class : classes_) {
    for (const Buffer& buffer : size_class.spares) bytes += buffer.capacity();
  }
  return bytes;
}

}  // namespace sparsgd::transport
