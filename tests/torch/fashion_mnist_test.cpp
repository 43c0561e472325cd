#include "sparsgd/torch/fashion_mnist.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace {

namespace fs = std::filesystem;
using sparsgd::torch_layer::Dataset;
using sparsgd::torch_layer::kDefaultFashionMnistDir;
using sparsgd::torch_layer::kFashionMnistMean;
using sparsgd::torch_layer::kFashionMnistStd;
using sparsgd::torch_layer::load_fashion_mnist;
using Bytes = std::vector<std::uint8_t>;

float normalized(int pixel) { return (static_cast<float>(pixel) / 255.0f - kFashionMnistMean) / kFashionMnistStd; }

std::vector<std::int64_t> class_counts(const torch::Tensor& labels) {
  const auto counts = torch::bincount(labels, /*weights=*/{}, /*minlength=*/10);
  return {counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel()};
}

std::vector<std::int64_t> first_labels(const torch::Tensor& labels, std::int64_t n) {
  const auto* p = labels.data_ptr<std::int64_t>();
  return {p, p + n};
}

// The real files from Debian's dataset-fashion-mnist (scripts/setup.sh installs it).
TEST(FashionMnist, LoadsTheTrainingSet) {
  const auto start = std::chrono::steady_clock::now();
  const Dataset d = load_fashion_mnist(kDefaultFashionMnistDir, /*train=*/true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("load_seconds", std::to_string(seconds));
  // The trainer loads it at every start; generous bound because builds share the machine.
  EXPECT_LT(seconds, 5.0);

  ASSERT_EQ(d.size(), 60000);
  EXPECT_EQ(d.images.sizes(), (std::vector<std::int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(d.images.scalar_type(), torch::kFloat32);
  EXPECT_EQ(d.labels.sizes(), (std::vector<std::int64_t>{60000}));
  EXPECT_EQ(d.labels.scalar_type(), torch::kInt64);
  EXPECT_TRUE(d.images.is_contiguous());

  // Fashion-MNIST's published order: ankle boot, T-shirt, T-shirt, dress, T-shirt, pullover, ...
  EXPECT_EQ(first_labels(d.labels, 10), (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(d.labels.min().item<std::int64_t>(), 0);
  EXPECT_EQ(d.labels.max().item<std::int64_t>(), 9);
  EXPECT_EQ(class_counts(d.labels), std::vector<std::int64_t>(10, 6000));

  // The constants are the training set's own statistics, so the result is standardized, and
  // the extremes are exactly the images of pixel values 0 and 255.
  EXPECT_NEAR(d.images.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(d.images.std().item<double>(), 1.0, 0.01);
  EXPECT_EQ(d.images.min().item<float>(), normalized(0));
  EXPECT_EQ(d.images.max().item<float>(), normalized(255));
  EXPECT_EQ(d.images[0][0][0][0].item<float>(), normalized(0));  // the corner is background
}

TEST(FashionMnist, LoadsTheTestSet) {
  const Dataset d = load_fashion_mnist(kDefaultFashionMnistDir, /*train=*/false);
  ASSERT_EQ(d.size(), 10000);
  EXPECT_EQ(d.images.sizes(), (std::vector<std::int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(first_labels(d.labels, 10), (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_EQ(class_counts(d.labels), std::vector<std::int64_t>(10, 1000));
  EXPECT_NEAR(d.images.mean().item<double>(), 0.0, 0.02);
}

// --- Hand-made files in a temporary directory ---------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sparsgd-fmnist-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void append_be32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

Bytes gzip(const Bytes& data, const fs::path& scratch) {
  gzFile f = gzopen(scratch.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("gzopen failed: " + scratch.string());
  if (!data.empty() && gzwrite(f, data.data(), static_cast<unsigned>(data.size())) != static_cast<int>(data.size())) {
    throw std::runtime_error("gzwrite failed");
  }
  if (gzclose(f) != Z_OK) throw std::runtime_error("gzclose failed");
  std::ifstream in(scratch, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const Bytes& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// A small valid t10k pair; each test breaks one thing about it.
struct Idx {
  std::uint32_t image_magic = 2051;
  std::uint32_t image_count = 3;
  std::uint32_t rows = 28;
  std::uint32_t cols = 28;
  std::size_t pixel_bytes = 3 * 28 * 28;
  std::uint32_t label_magic = 2049;
  std::uint32_t label_count = 3;
  Bytes labels{0, 9, 4};

  static std::uint8_t pixel(std::size_t i) { return static_cast<std::uint8_t>((i * 7) % 256); }

  Bytes image_bytes() const {
    Bytes b;
    append_be32(b, image_magic);
    append_be32(b, image_count);
    append_be32(b, rows);
    append_be32(b, cols);
    for (std::size_t i = 0; i < pixel_bytes; ++i) b.push_back(pixel(i));
    return b;
  }
  Bytes label_bytes() const {
    Bytes b;
    append_be32(b, label_magic);
    append_be32(b, label_count);
    b.insert(b.end(), labels.begin(), labels.end());
    return b;
  }
  void write(const fs::path& dir) const {
    write_file(dir / "t10k-images-idx3-ubyte.gz", gzip(image_bytes(), dir / "scratch.gz"));
    write_file(dir / "t10k-labels-idx1-ubyte.gz", gzip(label_bytes(), dir / "scratch.gz"));
  }
};

// Expects InvalidData whose message names `file` and says `why`.
void expect_invalid_data(const fs::path& dir, const std::string& file, const std::string& why) {
  try {
    load_fashion_mnist(dir.string(), /*train=*/false);
    ADD_FAILURE() << "expected sparsgd::InvalidData about " << file << " (" << why << ")";
  } catch (const sparsgd::InvalidData& e) {
    const std::string msg = e.what();
    static int seen = 0;
    ::testing::Test::RecordProperty("message" + std::to_string(++seen), msg);  // in --gtest_output=xml, to review the wording
    EXPECT_NE(msg.find((dir / file).string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  }
}

TEST(FashionMnistFiles, ValidSmallFilesLoadWithTheirValues) {
  TempDir dir;
  Idx{}.write(dir.path());
  const Dataset d = load_fashion_mnist(dir.path().string(), /*train=*/false);
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(first_labels(d.labels, 3), (std::vector<std::int64_t>{0, 9, 4}));
  const float* px = d.images.data_ptr<float>();
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{800}, std::size_t{3 * 784 - 1}}) {
    EXPECT_EQ(px[i], normalized(Idx::pixel(i))) << "pixel " << i;
  }
}

TEST(FashionMnistFiles, TrainFlagSelectsTheTrainFiles) {
  TempDir dir;
  Idx{}.write(dir.path());  // only t10k-* exist
  EXPECT_THROW(load_fashion_mnist(dir.path().string(), /*train=*/true), sparsgd::InvalidArgument);
}

TEST(FashionMnistFiles, MissingFilesSayWhatToInstall) {
  TempDir dir;
  try {
    load_fashion_mnist(dir.path().string(), /*train=*/true);
    FAIL() << "expected sparsgd::InvalidArgument";
  } catch (const sparsgd::InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find((dir.path() / "train-images-idx3-ubyte.gz").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
  }
}

TEST(FashionMnistFiles, BadImageMagic) {
  TempDir dir;
  Idx idx;
  idx.image_magic = 2049;
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "magic number is 2049 (0x00000801), expected 2051");
}

TEST(FashionMnistFiles, BadLabelMagic) {
  TempDir dir;
  Idx idx;
  idx.label_magic = 0x01000008;  // little-endian writer
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-labels-idx1-ubyte.gz", "expected 2049");
}

TEST(FashionMnistFiles, WrongImageSize) {
  TempDir dir;
  Idx idx;
  idx.cols = 27;
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "images are 28x27, expected 28x28");
}

TEST(FashionMnistFiles, TruncatedImages) {
  TempDir dir;
  Idx idx;
  idx.pixel_bytes = 2 * 784 + 100;
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "truncated");
}

TEST(FashionMnistFiles, TruncatedLabels) {
  TempDir dir;
  Idx idx;
  idx.labels = {0, 9};
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-labels-idx1-ubyte.gz", "truncated");
}

TEST(FashionMnistFiles, TrailingBytes) {
  TempDir dir;
  Idx idx;
  idx.pixel_bytes = 3 * 784 + 1;
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "trailing bytes");
}

TEST(FashionMnistFiles, LabelOutOfRange) {
  TempDir dir;
  Idx idx;
  idx.labels = {0, 10, 4};
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-labels-idx1-ubyte.gz", "label 10 at index 1");
}

TEST(FashionMnistFiles, CountMismatch) {
  TempDir dir;
  Idx idx;
  idx.label_count = 2;
  idx.labels = {0, 9};
  idx.write(dir.path());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "holds 3 images but");
}

TEST(FashionMnistFiles, NotGzip) {
  TempDir dir;
  Idx idx;
  idx.write(dir.path());
  // An uncompressed, otherwise valid IDX file is rejected as well as plain garbage.
  write_file(dir.path() / "t10k-images-idx3-ubyte.gz", idx.image_bytes());
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "not a gzip stream");
  write_file(dir.path() / "t10k-images-idx3-ubyte.gz", Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "not a gzip stream");
}

TEST(FashionMnistFiles, EmptyFile) {
  TempDir dir;
  Idx{}.write(dir.path());
  write_file(dir.path() / "t10k-labels-idx1-ubyte.gz", Bytes{});
  expect_invalid_data(dir.path(), "t10k-labels-idx1-ubyte.gz", "is empty");
}

TEST(FashionMnistFiles, CorruptGzipStream) {
  TempDir dir;
  Idx idx;
  idx.write(dir.path());
  const fs::path images = dir.path() / "t10k-images-idx3-ubyte.gz";
  const Bytes good = gzip(idx.image_bytes(), dir.path() / "scratch.gz");
  ASSERT_GT(good.size(), 40u);

  // Cut in half: the deflate stream ends early.
  write_file(images, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "truncated");

  // A flipped bit in the CRC-32 trailer: all data decodes, only the check catches it.
  Bytes bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 0x01;
  write_file(images, bad_crc);
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "corrupt gzip stream");

  // Garbage in the compressed body.
  Bytes garbage = good;
  for (std::size_t i = 12; i < garbage.size() - 8; ++i) garbage[i] = static_cast<std::uint8_t>(0xA5 ^ i);
  write_file(images, garbage);
  expect_invalid_data(dir.path(), "t10k-images-idx3-ubyte.gz", "corrupt gzip stream");
}

}  // namespace
