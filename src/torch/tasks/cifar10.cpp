#include "sparsgd/torch/cifar10.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kPixelBytes = kCifar10RecordBytes - 1;

// Where the files are: DIR itself, or the folder the official archive unpacks to inside it.
fs::path data_folder(const std::string& dir) {
  const fs::path inner = fs::path(dir) / "cifar-10-batches-bin";
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "test_batch.bin", ec) && fs::exists(inner / "test_batch.bin", ec)) return inner;
  return dir;
}

std::vector<char> read_records(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) check_regular_file(path, "CIFAR-10 file");
  if (!fs::is_regular_file(path, ec)) {
    throw InvalidArgument("CIFAR-10 file " + path.string() +
                          " not found: --data needs the directory of the binary version's files (data_batch_1.bin .. "
                          "data_batch_5.bin, test_batch.bin), from https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
  }
  const auto size = fs::file_size(path, ec);
  if (ec) throw InvalidData("CIFAR-10 file " + path.string() + ": cannot read its size (" + ec.message() + ")");
  if (size == 0) throw InvalidData("CIFAR-10 file " + path.string() + " is empty");
  if (size % kCifar10RecordBytes != 0) {
    throw InvalidData("CIFAR-10 file " + path.string() + " holds " + std::to_string(size) +
                      " bytes, not a whole number of 3073-byte records (truncated? the official files hold 10000 "
                      "records, 30730000 bytes)");
  }
  std::vector<char> bytes(size);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    throw InvalidData("CIFAR-10 file " + path.string() + ": read failed after " + std::to_string(in.gcount()) + " of " +
                      std::to_string(size) + " bytes");
  }
  return bytes;
}

}  // namespace

Cifar10Images load_cifar10(const std::string& dir, bool train) {
  const fs::path folder = data_folder(dir);
  std::vector<fs::path> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back(folder / ("data_batch_" + std::to_string(i) + ".bin"));
  } else {
    files.push_back(folder / "test_batch.bin");
  }
  // Every file is checked to exist before any is read, so a missing one is reported at once.
  std::error_code ec;
  for (const auto& f : files) {
    if (!fs::is_regular_file(f, ec)) read_records(f);
  }
  std::vector<std::vector<char>> contents;
  std::int64_t n = 0;
  for (const auto& f : files) {
    contents.push_back(read_records(f));
    n += static_cast<std::int64_t>(contents.back().size()) / kCifar10RecordBytes;
  }
  Cifar10Images out;
  out.images = torch::empty({n, 3, 32, 32}, torch::kUInt8);
  out.labels = torch::empty({n}, torch::kInt64);
  auto* pixels = out.images.data_ptr<std::uint8_t>();
  auto* labels = out.labels.data_ptr<std::int64_t>();
  std::int64_t at = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const auto& bytes = contents[f];
    const auto records = static_cast<std::int64_t>(bytes.size()) / kCifar10RecordBytes;
    for (std::int64_t r = 0; r < records; ++r, ++at) {
      const char* record = bytes.data() + r * kCifar10RecordBytes;
      const auto label = static_cast<unsigned char>(record[0]);
      if (label > 9) {
        throw InvalidData("CIFAR-10 file " + files[f].string() + ": record " + std::to_string(r) + " has label " +
                          std::to_string(label) + ", outside [0, 9] (not a CIFAR-10 binary file? CIFAR-100's "
                          "records have two label bytes)");
      }
      labels[at] = label;
      std::memcpy(pixels + at * kPixelBytes, record + 1, kPixelBytes);
    }
  }
  return out;
}

}  // namespace sparsgd::torch_layer
