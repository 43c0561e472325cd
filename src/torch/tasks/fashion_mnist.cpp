#include "sparsgd/torch/fashion_mnist.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::torch_layer {
namespace {

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned byte), the rank.
constexpr std::uint32_t kImagesMagic = 0x00000803;  // 2051
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // 2049
constexpr std::uint32_t kSide = 28;
constexpr std::size_t kPixels = kSide * kSide;
constexpr unsigned kClasses = 10;

[[noreturn]] void fail_data(const std::string& path, const std::string& what) {
  throw InvalidData("Fashion-MNIST file " + path + ": " + what);
}

// A gzip stream opened for reading that closes itself. Every read either delivers exactly what
// was asked for or throws, so the parsers below never see short data.
class GzReader {
 public:
  explicit GzReader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) {
      throw InvalidArgument("Fashion-MNIST file " + path_ +
                            " not found; install it with: apt-get install dataset-fashion-mnist "
                            "(or pass the directory that holds the four *-ubyte.gz files)");
    }
    check_regular_file(path_, "Fashion-MNIST file");
    // zlib reports an empty file as a (plain) stream of zero bytes; say what it is instead.
    if (std::filesystem::file_size(path_, ec) == 0 && !ec) fail_data(path_, "is empty");
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) fail_data(path_, "cannot be opened");
    // Fewer, larger reads than with zlib's 8 KiB default buffer for the 26 MB training images.
    gzbuffer(file_, 1 << 18);
    // zlib would otherwise pass a plain file through unchanged ("transparent" mode); the
    // package ships gzip, so anything else is not the file we expect. The destructor does not
    // run when the constructor throws, hence the explicit close.
    if (gzdirect(file_) != 0) {
      gzclose_r(file_);
      fail_data(path_, "not a gzip stream");
    }
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() { gzclose_r(file_); }

  const std::string& path() const { return path_; }

  void read_exact(void* dst, std::size_t bytes, const char* what) {
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t got = 0;
    while (got < bytes) {
      // gzread takes an unsigned and returns an int, so large reads go in pieces.
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(bytes - got, INT_MAX / 2));
      const int n = gzread(file_, out + got, chunk);
      // No "while reading <what>": zlib decodes ahead, so the damage may lie anywhere later.
      if (n < 0) fail_data(path_, "corrupt gzip stream (" + zlib_message() + ")");
      if (n == 0) {
        int errnum = Z_OK;
        gzerror(file_, &errnum);
        std::string why = "truncated: expected " + std::to_string(bytes) + " bytes of " + what +
                          ", the file ends after " + std::to_string(got);
        if (errnum != Z_OK) why += " (" + zlib_message() + ")";
        fail_data(path_, why);
      }
      got += static_cast<std::size_t>(n);
    }
  }

  // Reading one byte past the declared content also makes zlib check the stream's CRC and
  // length trailer, which a corrupt file would otherwise slip past.
  void expect_end() {
    unsigned char extra = 0;
    const int n = gzread(file_, &extra, 1);
    if (n < 0) fail_data(path_, "corrupt gzip stream (" + zlib_message() + ")");
    if (n > 0) fail_data(path_, "trailing bytes after the declared content");
    int errnum = Z_OK;
    gzerror(file_, &errnum);
    if (errnum != Z_OK) fail_data(path_, "corrupt gzip stream (" + zlib_message() + ")");
  }

  std::uint32_t read_be32(const char* what) {
    std::array<unsigned char, 4> b{};
    read_exact(b.data(), b.size(), what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           std::uint32_t{b[3]};
  }

  // Reads `bytes` in pieces and grows the buffer only as data arrives, so a corrupt header that
  // claims billions of items fails as truncated instead of allocating terabytes.
  std::vector<unsigned char> read_payload(std::size_t bytes, const char* what) {
    constexpr std::size_t kPiece = std::size_t{1} << 24;
    std::vector<unsigned char> data;
    data.reserve(std::min(bytes, kPiece));
    while (data.size() < bytes) {
      const std::size_t at = data.size();
      data.resize(at + std::min(kPiece, bytes - at));
      read_exact(data.data() + at, data.size() - at, what);
    }
    return data;
  }

 private:
  std::string zlib_message() {
    int errnum = Z_OK;
    const char* msg = gzerror(file_, &errnum);
    std::string text = (msg != nullptr && *msg != '\0') ? msg : "zlib error " + std::to_string(errnum);
    // zlib prefixes the path, which our message already starts with.
    if (text.starts_with(path_ + ": ")) text.erase(0, path_.size() + 2);
    return text;
  }

  std::string path_;
  gzFile file_ = nullptr;
};

void expect_magic(GzReader& in, std::uint32_t expected) {
  const std::uint32_t magic = in.read_be32("the magic number");
  if (magic != expected) {
    // The hex form shows a byte-order mix-up at a glance (0x03080000 for 0x00000803).
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(magic));
    fail_data(in.path(), "magic number is " + std::to_string(magic) + " (" + hex + "), expected " +
                             std::to_string(expected) + " (IDX " +
                             (expected == kImagesMagic ? "images" : "labels") + ")");
  }
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = (std::filesystem::path(dir) / (train ? "train" : "t10k")).string();
  // Open both before reading either, so a missing file is reported before any data work.
  GzReader images_in(prefix + "-images-idx3-ubyte.gz");
  GzReader labels_in(prefix + "-labels-idx1-ubyte.gz");

  expect_magic(images_in, kImagesMagic);
  const std::uint32_t image_count = images_in.read_be32("the image count");
  const std::uint32_t rows = images_in.read_be32("the row count");
  const std::uint32_t cols = images_in.read_be32("the column count");
  if (rows != kSide || cols != kSide) {
    fail_data(images_in.path(), "images are " + std::to_string(rows) + "x" + std::to_string(cols) +
                                    ", expected 28x28");
  }
  expect_magic(labels_in, kLabelsMagic);
  const std::uint32_t label_count = labels_in.read_be32("the label count");
  if (image_count != label_count) {
    fail_data(images_in.path(), "holds " + std::to_string(image_count) + " images but " +
                                    labels_in.path() + " holds " + std::to_string(label_count) +
                                    " labels");
  }
  const std::size_t n = image_count;

  const auto raw_labels = labels_in.read_payload(n, "the labels");
  labels_in.expect_end();
  const auto raw_images = images_in.read_payload(n * kPixels, "the pixels");
  images_in.expect_end();

  Dataset out;
  const auto count = static_cast<std::int64_t>(n);
  out.labels = torch::empty({count}, torch::kInt64);
  auto* labels = out.labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < n; ++i) {
    if (raw_labels[i] >= kClasses) {
      fail_data(labels_in.path(), "label " + std::to_string(raw_labels[i]) + " at index " +
                                      std::to_string(i) + " is outside [0, 9]");
    }
    labels[i] = raw_labels[i];
  }

  // A byte has 256 values, so a table makes normalization one load per pixel.
  std::array<float, 256> table{};
  for (std::size_t v = 0; v < table.size(); ++v) {
    table[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  out.images = torch::empty({count, 1, kSide, kSide}, torch::kFloat32);
  float* pixels = out.images.data_ptr<float>();
  for (std::size_t i = 0; i < raw_images.size(); ++i) pixels[i] = table[raw_images[i]];
  return out;
}

}  // namespace sparsgd::torch_layer
