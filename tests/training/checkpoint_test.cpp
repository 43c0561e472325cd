// The checkpoint format: round trip, atomic replacement, and refusal of every damaged file.
#include "sparsgd/training/checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "sparsgd/core/error.hpp"

namespace sparsgd {
namespace {

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sparsgd-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "c.ckpt").string();
    c_.floats["p"] = {1.0f, -2.5f, 3.0f};
    c_.doubles["h"] = {0.25, 1e300};
    c_.integers["pos"] = {1, 2, 3};
    c_.texts["config"] = "cnn|topk";
    write_checkpoint(path_, c_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string bytes() {
    std::ifstream in(path_, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void overwrite(const std::string& b) { std::ofstream(path_, std::ios::binary | std::ios::trunc) << b; }
  std::filesystem::path dir_;
  std::string path_;
  Checkpoint c_;
};

TEST_F(CheckpointFile, RoundTrips) {
  const Checkpoint r = read_checkpoint(path_);
  EXPECT_EQ(r.float_section("p"), c_.floats["p"]);
  EXPECT_EQ(r.double_section("h"), c_.doubles["h"]);
  EXPECT_EQ(r.integer_section("pos"), c_.integers["pos"]);
  EXPECT_EQ(r.text_section("config"), "cnn|topk");
  EXPECT_THROW(r.float_section("absent"), InvalidData);
  // No temporary is left beside it.
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(path_).parent_path())) {
    EXPECT_EQ(entry.path().filename().string().rfind('.', 0), std::string::npos) << entry.path();
  }
}

TEST_F(CheckpointFile, RefusesTruncatedCorruptedAndForeignFiles) {
  const std::string good = bytes();
  for (const std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{20}, good.size() / 2, good.size() - 1}) {
    overwrite(good.substr(0, cut));
    EXPECT_THROW(read_checkpoint(path_), InvalidData) << "cut at " << cut;
  }
  for (const std::size_t at : {std::size_t{30}, good.size() / 2, good.size() - 9}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    overwrite(bad);
    try {
      read_checkpoint(path_);
      FAIL() << "flipped byte " << at << " accepted";
    } catch (const InvalidData& e) {
      EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
    }
  }
  std::string other_version = good;
  other_version[8] = 9;
  overwrite(other_version);
  EXPECT_THROW(read_checkpoint(path_), InvalidData);
  overwrite("not a checkpoint at all, just text");
  EXPECT_THROW(read_checkpoint(path_), InvalidData);
  EXPECT_THROW(read_checkpoint((dir_ / "missing.ckpt").string()), InvalidArgument);
}

TEST_F(CheckpointFile, KeepsThePreviousCheckpoint) {
  const std::string previous = path_ + ".prev";
  Checkpoint next = c_;
  next.integers["pos"] = {4, 5, 6};
  write_checkpoint(path_, next, previous);
  EXPECT_EQ(read_checkpoint(path_).integer_section("pos"), (std::vector<std::uint64_t>{4, 5, 6}));
  EXPECT_EQ(read_checkpoint(previous).integer_section("pos"), (std::vector<std::uint64_t>{1, 2, 3}));
  // The first checkpoint of a run has no predecessor: nothing to keep, no error.
  std::filesystem::remove(path_);
  std::filesystem::remove(previous);
  write_checkpoint(path_, next, previous);
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(previous));
}

TEST(CheckpointBytes, DecodeRefusesDuplicateSectionsAndHugeCounts) {
  Checkpoint c;
  c.floats["a"] = {1.0f};
  std::string bytes = encode_checkpoint(c);
  EXPECT_EQ(decode_checkpoint(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem").float_section("a"),
            std::vector<float>{1.0f});
  Checkpoint twice;
  twice.floats["a"] = {1.0f};
  twice.doubles["a"] = {2.0};
  const std::string dup = encode_checkpoint(twice);
  EXPECT_THROW(decode_checkpoint(std::as_bytes(std::span(dup.data(), dup.size())), "mem"), InvalidData);
}

// Empty sections (the mlp has no batch-norm buffers) decode to empty vectors. Decoding them used
// to call memcpy with the empty vector's null data pointer: undefined behaviour that UBSan reports
// (found by fuzz_checkpoint; scripts/sanitize.sh runs this test under UBSan).
TEST(CheckpointBytes, EmptySectionsRoundTrip) {
  Checkpoint c;
  c.floats["buffers"] = {};
  c.doubles["d"] = {};
  c.integers["i"] = {};
  c.texts[""] = "";
  const std::string bytes = encode_checkpoint(c);
  const Checkpoint r = decode_checkpoint(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem");
  EXPECT_TRUE(r.float_section("buffers").empty());
  EXPECT_TRUE(r.double_section("d").empty());
  EXPECT_TRUE(r.integer_section("i").empty());
  EXPECT_EQ(r.text_section(""), "");
  EXPECT_EQ(encode_checkpoint(r), bytes);
}

}  // namespace
}  // namespace sparsgd
