#include "sparsgd/core/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "sparsgd/core/error.hpp"

namespace sparsgd {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int error) {
  throw Error("cannot " + what + " " + path.string() + ": " + std::strerror(error));
}

// Writes all of `data` to fd; 0, or the errno of the failure (ENOSPC for a write that wrote nothing).
int write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", temporary, errno);
  if (const int error = write_all(fd, contents); error != 0) {
    ::close(fd);
    ::unlink(temporary.c_str());
    fail("write", path, error);
  }
  // Some file systems report a full disk only at fsync or close.
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    fail("write", path, error);
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("write", path, error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("rename a file into", path, error);
  }
}

AppendFile::AppendFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("open", path_, errno);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);  // what was not made durable is lost, as after a crash
}

void AppendFile::append(std::string_view text) {
  pending_.append(text);
  if (pending_.size() >= (1u << 16)) write_out();
}

void AppendFile::write_out() {
  const int error = write_all(fd_, pending_);
  // After a failure part of the rows may be in the file: a torn tail, which a resume repairs.
  pending_.clear();
  if (error != 0) fail("write", path_, error);
}

void AppendFile::durable() {
  write_out();
  if (::fsync(fd_) != 0) fail("write", path_, errno);
}

}  // namespace sparsgd
