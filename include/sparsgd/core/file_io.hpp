#pragma once
// Writing a result file so that a run never claims a file it did not write: the contents go to a
// temporary file beside the target, every write, the flush, fsync and close are checked, and only
// then does a rename make it the file. A full disk or a read-only directory is an Error naming the
// path and the reason; the target is then either its old self or absent, never torn or empty.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace sparsgd {

// A file made beside its target under a name nobody can have prepared: `.NAME.XXXXXX` in the
// target's directory, created exclusively (O_CREAT | O_EXCL: never through a link planted there,
// never into a file someone else made), mode 0644. write() checks every write; commit() makes it
// durable (fsync, close) and renames it onto the target, which replaces whatever the target was
// (a link included) and never writes through it. Destroyed before commit(), it removes itself,
// unless abandon() left it behind on purpose (a crash being simulated). Errors name the target.
class ExclusiveTemporary {
 public:
  explicit ExclusiveTemporary(std::filesystem::path target);
  ~ExclusiveTemporary();
  ExclusiveTemporary(const ExclusiveTemporary&) = delete;
  ExclusiveTemporary& operator=(const ExclusiveTemporary&) = delete;
  void write(std::string_view data);
  // `before_rename` runs between the file's fsync and the rename (a checkpoint keeps the previous
  // one there).
  void commit(const std::function<void()>& before_rename = {});
  // Closes it and leaves it where it is.
  void abandon();
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool keep_ = false;
};

// The contents through an ExclusiveTemporary: the target is its old self or the new contents.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

// The whole of a file the program reads (a checkpoint, a run's records, a data file): it must be a
// regular file (a FIFO, a device such as /dev/zero or a directory is refused by name at once,
// never waited on or read without end), at most max_bytes long. `what` names it in errors
// ("checkpoint", "metrics file"): InvalidArgument when it cannot be opened, InvalidData when it is
// not a regular file, is longer than max_bytes or cannot be read whole.
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what);
// Throws as read_regular_file does, without reading: for readers that open the file themselves
// (zlib, TorchScript).
void check_regular_file(const std::filesystem::path& path, std::string_view what);

// A file's identity by content: its size and the FNV-1a hash of all its bytes (read in chunks, so
// a large file is not held in memory), checked and refused as read_regular_file does.
struct FileDigest {
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};
FileDigest digest_regular_file(const std::filesystem::path& path, std::string_view what);

// A result file that grows row by row (a training run's metrics.csv). Rows are kept in memory and
// written, checked, when durable() is called or the buffer grows large; durable() also fsyncs, so
// that what a checkpoint covers is on disk before the checkpoint exists. A failed write is an
// Error naming the path and the reason. Opens (creating) at construction and appends; a path that is
// a symbolic link, not a regular file, or a file with other hard links is refused by name, so that
// rows never land in a file someone else prepared.
class AppendFile {
 public:
  explicit AppendFile(std::filesystem::path path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view text);
  void durable();

 private:
  void write_out();

  std::filesystem::path path_;
  int fd_ = -1;
  std::string pending_;
};

}  // namespace sparsgd
