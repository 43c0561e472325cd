#pragma once
// How the ring allreduce cuts its chunks for pipelining: a chunk of more than kRingSegmentValues
// goes as several messages (segments), so that the sum of one segment runs while the next is on
// the wire. One rule for the algorithm, its cost model and its tests.

#include <cstddef>
#include <utility>

namespace sparsgd::collectives {

// 4 MiB of floats: 34 ms at 1 Gbit/s, so a message's fixed cost (alpha: 0.05-0.5 ms on the
// networks this library models) stays around 1% of it, while the sum that is not hidden (the last
// segment's of each step) stays a few milliseconds.
inline constexpr std::size_t kRingSegmentValues = std::size_t{1} << 20;

// Segments per ring step for `values` floats summed by `ranks` ranks: every chunk (of at most
// ceil(values / ranks)) is cut into this many, at least one, of at most segment_values each.
inline std::size_t ring_segment_count(std::size_t values, int ranks,
                                      std::size_t segment_values = kRingSegmentValues) {
  const auto p = static_cast<std::size_t>(ranks < 1 ? 1 : ranks);
  const std::size_t per_segment = segment_values < 1 ? 1 : segment_values;
  const std::size_t largest_chunk = (values + p - 1) / p;
  const std::size_t segments = (largest_chunk + per_segment - 1) / per_segment;
  return segments < 1 ? 1 : segments;
}

// Segment s of `segments` of the range [begin, end): [first, last).
inline std::pair<std::size_t, std::size_t> ring_segment(std::pair<std::size_t, std::size_t> chunk, std::size_t s,
                                                        std::size_t segments) {
  const std::size_t length = chunk.second - chunk.first;
  return {chunk.first + length * s / segments, chunk.first + length * (s + 1) / segments};
}

}  // namespace sparsgd::collectives
