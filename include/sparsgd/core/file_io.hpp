#pragma once
// Writing a result file so that a run never claims a file it did not write: the contents go to a
// temporary file beside the target, every write, the flush, fsync and close are checked, and only
// then does a rename make it the file. A full disk or a read-only directory is an Error naming the
// path and the reason; the target is then either its old self or absent, never torn or empty.

#include <filesystem>
#include <string>
#include <string_view>

namespace sparsgd {

void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

// A result file that grows row by row (a training run's metrics.csv). Rows are kept in memory and
// written, checked, when durable() is called or the buffer grows large; durable() also fsyncs, so
// that what a checkpoint covers is on disk before the checkpoint exists. A failed write is an
// Error naming the path and the reason. Opens (creating) at construction and appends.
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
