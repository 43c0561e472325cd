#pragma once
// Spare message buffers by size class, for a transport that hands a buffer to the receiver with
// each message (the local transport) and gets the receiver's previous buffer back.
//
// Why classes and not one list: an exchange sends messages of very different sizes (a 4 KB count
// histogram, then a 1 MB gather round), so a buffer taken blindly is often too small and is
// regrown, a fresh large allocation every exchange; and one used for smaller messages keeps its
// large capacity, so over time every spare grows to the largest message. Here a message takes a
// spare of its own class, whose capacity holds any message of the class and wastes at most a
// quarter of it, and a new buffer is allocated at its class's size, so that steady traffic
// allocates nothing whatever the mix of sizes.
//
// Why trimming: what one phase leaves (auto's trials of other aggregators, a larger model) must
// not stay pooled for good. Every `epoch_takes` takes, each class frees the spares it did not need
// during the epoch (its low-water mark), so a class out of use is empty within two epochs and one
// in use keeps what its busiest moment took.
//
// Not thread-safe: the owner locks.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparsgd::transport {

class BufferPool {
 public:
  using Buffer = std::vector<std::byte>;

  explicit BufferPool(std::uint64_t epoch_takes);

  // An empty buffer whose capacity holds `bytes`: a spare of the class of `bytes`, or a new buffer
  // with the class's capacity (none for 0 bytes). Spares trimmed at an epoch's end are moved into
  // `released`, for the caller to free outside its lock.
  Buffer take(std::size_t bytes, std::vector<Buffer>& released);
  // Keeps `buffer` (any contents) for a later take, in the largest class its capacity holds;
  // buffers below the smallest class are freed.
  void give(Buffer buffer);

  std::size_t spare_buffers() const;
  std::size_t spare_bytes() const;  // capacity held

  // The classes: 256 bytes, then four steps per power of two (320, 384, 448, 512, 640, ...).
  static constexpr std::size_t kSmallestClassBytes = 256;
  static std::size_t class_bytes(std::size_t index);
  // The smallest class whose size is at least `bytes` (0 for bytes <= 256).
  static std::size_t class_for_request(std::size_t bytes);

 private:
  struct SizeClass {
    std::vector<Buffer> spares;  // taken from the back
    std::size_t low_water = 0;   // the fewest spares held since the epoch began
  };
  void end_epoch(std::vector<Buffer>& released);

  std::uint64_t epoch_takes_;
  std::uint64_t takes_in_epoch_ = 0;
  std::vector<SizeClass> classes_;
};

}  // namespace sparsgd::transport
