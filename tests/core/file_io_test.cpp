// Result files are written only where the program means to write them: never through a symbolic
// link planted at the target or at any name beside it, never into a file someone else prepared;
// and an interrupted write leaves the target as it was.

#include "sparsgd/core/file_io.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/hash.hpp"

namespace sparsgd {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsgd-file-io-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    victim_ = dir_ / "victim";
    std::ofstream(victim_) << "precious";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const fs::path& p) const {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_, victim_;
};

TEST_F(FileIo, AtomicWritesReplaceALinkAtTheTargetInsteadOfFollowingIt) {
  fs::create_symlink(victim_, dir_ / "summary.json");
  write_file_atomically(dir_ / "summary.json", "result");
  EXPECT_FALSE(fs::is_symlink(dir_ / "summary.json"));
  EXPECT_EQ(read(dir_ / "summary.json"), "result");
  EXPECT_EQ(read(victim_), "precious");
}

TEST_F(FileIo, AtomicWritesIgnoreLinksPlantedAtTheOldTemporaryNames) {
  for (const char* name : {"summary.json.tmp", ".summary.json.tmp", "summary.json.new"}) {
    fs::create_symlink(victim_, dir_ / name);
  }
  write_file_atomically(dir_ / "summary.json", "result");
  EXPECT_EQ(read(dir_ / "summary.json"), "result");
  EXPECT_EQ(read(victim_), "precious");
  // Nothing of its own is left beside the target.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 5u);  // the victim, the three links, the result
}

TEST_F(FileIo, AnUncommittedTemporaryRemovesItselfAndAnAbandonedOneStays) {
  fs::path left;
  {
    ExclusiveTemporary file(dir_ / "out.csv");
    file.write("half");
    left = file.path();
    EXPECT_TRUE(fs::exists(left));
    EXPECT_EQ(fs::status(left).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  EXPECT_FALSE(fs::exists(left));
  EXPECT_FALSE(fs::exists(dir_ / "out.csv"));
  {
    ExclusiveTemporary file(dir_ / "out.csv");
    file.write("torn");
    left = file.path();
    file.abandon();
  }
  EXPECT_EQ(read(left), "torn");
  EXPECT_FALSE(fs::exists(dir_ / "out.csv"));
}

TEST_F(FileIo, AppendingRefusesALinkAFifoAndAFileWithOtherHardLinks) {
  fs::create_symlink(victim_, dir_ / "metrics.csv");
  try {
    AppendFile file(dir_ / "metrics.csv");
    ADD_FAILURE() << "appended through a link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.csv: it is a symbolic link"), std::string::npos) << e.what();
  }
  fs::create_hard_link(victim_, dir_ / "epochs.csv");
  try {
    AppendFile file(dir_ / "epochs.csv");
    ADD_FAILURE() << "appended into a file with another hard link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("other hard links"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::mkfifo((dir_ / "fifo.csv").c_str(), 0644), 0);
  EXPECT_THROW(AppendFile(dir_ / "fifo.csv"), Error);  // at once: the open does not wait for a reader
  EXPECT_EQ(read(victim_), "precious");
  AppendFile fresh(dir_ / "fresh.csv");
  fresh.append("a,b\n");
  fresh.durable();
  EXPECT_EQ(read(dir_ / "fresh.csv"), "a,b\n");
}

// Reads never wait on a FIFO, never read a device without end, and say what they found instead.
TEST_F(FileIo, ReadsTakeOnlyRegularFilesWithinTheirBound) {
  std::ofstream(dir_ / "records.csv") << "a,b\n1,2\n";
  EXPECT_EQ(read_regular_file(dir_ / "records.csv", 100, "run record"), "a,b\n1,2\n");
  const auto refused = [](const fs::path& path, std::uint64_t bound) -> std::string {
    try {
      read_regular_file(path, bound, "checkpoint");
    } catch (const InvalidData& e) {
      return e.what();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refused(dir_ / "records.csv", 5).find("holds 8 bytes, more than the 5 it can hold"), std::string::npos);
  ASSERT_EQ(::mkfifo((dir_ / "rank-0.ckpt").c_str(), 0644), 0);
  EXPECT_NE(refused(dir_ / "rank-0.ckpt", 100).find("is a FIFO, not a regular file"), std::string::npos);
  fs::create_symlink("/dev/zero", dir_ / "zero.ckpt");
  EXPECT_NE(refused(dir_ / "zero.ckpt", 100).find("is a device, not a regular file"), std::string::npos);
  fs::create_directory(dir_ / "dir.ckpt");
  EXPECT_NE(refused(dir_ / "dir.ckpt", 100).find("is a directory, not a regular file"), std::string::npos);
  EXPECT_NE(refused(dir_ / "absent.ckpt", 100).find("cannot open checkpoint"), std::string::npos);
  EXPECT_THROW(check_regular_file(dir_ / "rank-0.ckpt", "checkpoint"), InvalidData);
  EXPECT_NO_THROW(check_regular_file(dir_ / "records.csv", "run record"));
}

// A digest is the size and the FNV-1a of every byte, over reads of any size, and refuses what is
// not a regular file as the reads do.
TEST_F(FileIo, DigestsCoverEveryByteOfARegularFile) {
  std::string bytes(3 * (1 << 20) + 17, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::ofstream(dir_ / "model.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const FileDigest digest = digest_regular_file(dir_ / "model.pt", "TorchScript model");
  EXPECT_EQ(digest.bytes, bytes.size());
  EXPECT_EQ(digest.hash, fnv1a(std::as_bytes(std::span<const char>(bytes))));
  bytes.back() ^= 1;  // the last byte of the last, short read
  std::ofstream(dir_ / "other.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_NE(digest_regular_file(dir_ / "other.pt", "TorchScript model").hash, digest.hash);
  std::ofstream(dir_ / "empty.pt");
  EXPECT_EQ(digest_regular_file(dir_ / "empty.pt", "TorchScript model").hash, kFnv1aOffset);
  ASSERT_EQ(::mkfifo((dir_ / "fifo.pt").c_str(), 0644), 0);
  EXPECT_THROW(digest_regular_file(dir_ / "fifo.pt", "TorchScript model"), InvalidData);
  EXPECT_THROW(digest_regular_file(dir_ / "absent.pt", "TorchScript model"), InvalidArgument);
}

}  // namespace
}  // namespace sparsgd
