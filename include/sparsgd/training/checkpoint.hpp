#pragma once
// One worker's training checkpoint, written atomically (temporary file, flush, fsync, rename) in a
// versioned binary format with a checksum, so that a crash while writing leaves the previous
// checkpoint intact and a truncated or corrupted file is refused. The decoder takes outside data, so
// it checks every length before using it (and is fuzzed: tests/fuzz).
//
// Layout (little-endian): "SPGDCKPT", u32 version, u64 payload length, payload, u64 FNV-1a of the
// payload. Payload: named sections, each u32 name length, name, u64 element count, u8 type
// (0 float32, 1 float64, 2 uint64, 3 bytes), data.

#include <cstdint>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace sparsgd {

inline constexpr std::uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<double>> doubles;
  std::map<std::string, std::vector<std::uint64_t>> integers;
  std::map<std::string, std::string> texts;

  // Throw InvalidData naming the section if it is absent.
  const std::vector<float>& float_section(const std::string& name) const;
  const std::vector<double>& double_section(const std::string& name) const;
  const std::vector<std::uint64_t>& integer_section(const std::string& name) const;
  const std::string& text_section(const std::string& name) const;
};

// The file's bytes, and back. decode_checkpoint throws InvalidData (naming `source`) if the bytes
// are not a checkpoint, have another version, are truncated or fail their checksum.
std::string encode_checkpoint(const Checkpoint& checkpoint);
Checkpoint decode_checkpoint(std::span<const std::byte> bytes, const std::string& source);

// If `previous` is not empty, the checkpoint that `path` held is kept under that name. The new one is
// on disk before either rename, so a crash at any point leaves at least one complete checkpoint.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint, const std::string& previous = {});
// The most a checkpoint may hold unless the reader knows better: 4 floats of state for each of 2^32
// parameters (the largest model the flat buffers index), and room for the rest.
inline constexpr std::uint64_t kMaxCheckpointBytes = (std::uint64_t{16} << 32) + (std::uint64_t{1} << 30);
// Throws InvalidArgument if the file cannot be opened, InvalidData if it is not a regular file (a
// FIFO, a device, a directory: refused at once), holds more than max_bytes, is not a checkpoint,
// has another version, is truncated or fails its checksum.
Checkpoint read_checkpoint(const std::string& path, std::uint64_t max_bytes = kMaxCheckpointBytes);

}  // namespace sparsgd
