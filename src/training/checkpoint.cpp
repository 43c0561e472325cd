#include "sparsgd/training/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"
#include "sparsgd/core/hash.hpp"

namespace sparsgd {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'G', 'D', 'C', 'K', 'P', 'T'};

std::uint64_t checksum(std::span<const char> bytes) { return fnv1a(std::as_bytes(bytes)); }

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
void put_section(std::string& out, const std::string& name, std::uint8_t type, const T* data, std::uint64_t count) {
  put(out, static_cast<std::uint32_t>(name.size()));
  out += name;
  put(out, count);
  put(out, type);
  out.append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

class Reader {
 public:
  Reader(std::span<const char> bytes, const std::string& source) : bytes_(bytes), source_(source) {}
  template <typename T>
  T get() {
    T value;
    take(&value, sizeof value);
    return value;
  }
  void take(void* out, std::size_t n) {
    if (n > bytes_.size() - pos_) fail("truncated");
    // An empty section's vector may have no storage yet, and memcpy with a null pointer is
    // undefined even for zero bytes (found by fuzz_checkpoint with UBSan).
    if (n != 0) std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& what) const { throw InvalidData("checkpoint " + source_ + ": " + what); }

 private:
  std::span<const char> bytes_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

template <typename Map>
const typename Map::mapped_type& section(const Map& map, const std::string& name) {
  const auto it = map.find(name);
  if (it == map.end()) throw InvalidData("checkpoint lacks section '" + name + "'");
  return it->second;
}

}  // namespace

const std::vector<float>& Checkpoint::float_section(const std::string& name) const { return section(floats, name); }
const std::vector<double>& Checkpoint::double_section(const std::string& name) const { return section(doubles, name); }
const std::vector<std::uint64_t>& Checkpoint::integer_section(const std::string& name) const {
  return section(integers, name);
}
const std::string& Checkpoint::text_section(const std::string& name) const { return section(texts, name); }

std::string encode_checkpoint(const Checkpoint& checkpoint) {
  std::string payload;
  for (const auto& [name, v] : checkpoint.floats) put_section(payload, name, 0, v.data(), v.size());
  for (const auto& [name, v] : checkpoint.doubles) put_section(payload, name, 1, v.data(), v.size());
  for (const auto& [name, v] : checkpoint.integers) put_section(payload, name, 2, v.data(), v.size());
  for (const auto& [name, v] : checkpoint.texts) put_section(payload, name, 3, v.data(), v.size());
  std::string file(kMagic, sizeof kMagic);
  put(file, kCheckpointVersion);
  put(file, static_cast<std::uint64_t>(payload.size()));
  file += payload;
  put(file, checksum(payload));
  return file;
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint, const std::string& previous) {
  const std::string file = encode_checkpoint(checkpoint);
  try {
    // Written under a fresh, exclusively created name, durable before the rename makes it the checkpoint.
    ExclusiveTemporary temporary(path);
    temporary.write(file);
    temporary.commit([&] {
      if (!previous.empty() && std::rename(path.c_str(), previous.c_str()) != 0 && errno != ENOENT) {
        throw InvalidArgument("cannot keep the previous checkpoint as " + previous + ": " + std::strerror(errno));
      }
    });
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    throw InvalidArgument(std::string("checkpoint: ") + e.what());
  }
  // The renames are durable only once the directory is on disk too.
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

Checkpoint decode_checkpoint(std::span<const std::byte> raw, const std::string& source) {
  const std::span<const char> file(reinterpret_cast<const char*>(raw.data()), raw.size());
  Reader header(file, source);
  char magic[sizeof kMagic];
  header.take(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) header.fail("not a sparsgd checkpoint");
  const auto version = header.get<std::uint32_t>();
  if (version != kCheckpointVersion) {
    header.fail("format version " + std::to_string(version) + ", this build reads version " +
                std::to_string(kCheckpointVersion));
  }
  const auto length = header.get<std::uint64_t>();
  constexpr std::size_t kFixed = sizeof kMagic + 4 + 8 + 8;
  if (file.size() < kFixed || length != file.size() - kFixed) header.fail("truncated or overlong");
  const std::span<const char> payload = file.subspan(sizeof kMagic + 12, length);
  std::uint64_t stored = 0;
  std::memcpy(&stored, file.data() + file.size() - 8, 8);
  if (stored != checksum(payload)) header.fail("checksum mismatch (corrupted)");

  Checkpoint checkpoint;
  Reader r(payload, source);
  while (!r.done()) {
    const auto name_length = r.get<std::uint32_t>();
    if (name_length > 4096) r.fail("implausible section name length");
    std::string name(name_length, '\0');
    r.take(name.data(), name_length);
    const auto count = r.get<std::uint64_t>();
    const auto type = r.get<std::uint8_t>();
    if (type > 3) r.fail("unknown section type in '" + name + "'");
    const std::size_t element = type == 0 ? 4 : type == 3 ? 1 : 8;
    if (count > payload.size() / element) r.fail("section '" + name + "' longer than the file");
    const bool duplicate = checkpoint.floats.count(name) + checkpoint.doubles.count(name) +
                               checkpoint.integers.count(name) + checkpoint.texts.count(name) != 0;
    if (duplicate) r.fail("section '" + name + "' appears twice");
    switch (type) {
      case 0: checkpoint.floats[name].resize(count); r.take(checkpoint.floats[name].data(), count * 4); break;
      case 1: checkpoint.doubles[name].resize(count); r.take(checkpoint.doubles[name].data(), count * 8); break;
      case 2: checkpoint.integers[name].resize(count); r.take(checkpoint.integers[name].data(), count * 8); break;
      default: checkpoint.texts[name].resize(count); r.take(checkpoint.texts[name].data(), count); break;
    }
  }
  return checkpoint;
}

Checkpoint read_checkpoint(const std::string& path, std::uint64_t max_bytes) {
  const std::string file = read_regular_file(path, max_bytes, "checkpoint");
  return decode_checkpoint(std::as_bytes(std::span(file.data(), file.size())), path);
}

}  // namespace sparsgd
