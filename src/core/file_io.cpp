#include "sparsgd/core/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/hash.hpp"

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

ExclusiveTemporary::ExclusiveTemporary(std::filesystem::path target) : target_(std::move(target)) {
  std::filesystem::path directory = target_.parent_path();
  if (directory.empty()) directory = ".";
  std::string leaf(".");
  leaf.append(target_.filename().string());
  leaf.append(".XXXXXX");
  std::string name = (directory / leaf).string();
  // mkostemp opens with O_CREAT | O_EXCL under a fresh random name.
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) fail("create a file beside", target_, errno);
  path_ = name;
  if (::fchmod(fd_, 0644) != 0) {
    const int error = errno;
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    fail("create a file beside", target_, error);
  }
}

ExclusiveTemporary::~ExclusiveTemporary() {
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty() && !keep_) ::unlink(path_.c_str());
}

void ExclusiveTemporary::write(std::string_view data) {
  if (fd_ < 0) throw Error("cannot write " + target_.string() + ": its temporary file is closed");
  if (const int error = write_all(fd_, data); error != 0) fail("write", target_, error);
}

void ExclusiveTemporary::commit(const std::function<void()>& before_rename) {
  if (fd_ < 0) throw Error("cannot write " + target_.string() + ": its temporary file is closed");
  // Some file systems report a full disk only at fsync or close.
  if (::fsync(fd_) != 0) fail("write", target_, errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail("write", target_, errno);
  if (before_rename) before_rename();
  if (std::rename(path_.c_str(), target_.c_str()) != 0) fail("rename a file into", target_, errno);
  path_.clear();
}

void ExclusiveTemporary::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  keep_ = true;
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens without waiting (a FIFO's open would block for a writer) and checks the kind and length.
int open_regular(const std::filesystem::path& path, std::string_view what, struct stat& status) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw InvalidArgument("cannot open " + std::string(what) + " " + path.string() + ": " + std::strerror(errno));
  }
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    const mode_t mode = status.st_mode;
    ::close(fd);
    throw InvalidData(std::string(what) + " " + path.string() + " is " + file_kind(mode) +
                      ", not a regular file");
  }
  return fd;
}

}  // namespace

void check_regular_file(const std::filesystem::path& path, std::string_view what) {
  struct stat status {};
  ::close(open_regular(path, what, status));
}

FileDigest digest_regular_file(const std::filesystem::path& path, std::string_view what) {
  struct stat status {};
  const int fd = open_regular(path, what, status);
  FileDigest digest{0, kFnv1aOffset};
  std::vector<std::byte> chunk(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw InvalidData("cannot read " + std::string(what) + " " + path.string() + ": " + std::strerror(error));
    }
    if (n == 0) break;
    digest.bytes += static_cast<std::uint64_t>(n);
    digest.hash = fnv1a(std::span<const std::byte>(chunk.data(), static_cast<std::size_t>(n)), digest.hash);
  }
  ::close(fd);
  return digest;
}

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
  struct stat status {};
  const int fd = open_regular(path, what, status);
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw InvalidData(std::string(what) + " " + path.string() + " holds " + std::to_string(size) +
                      " bytes, more than the " + std::to_string(max_bytes) + " it can hold");
  }
  std::string contents(size, '\0');
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : 0;
      ::close(fd);
      throw InvalidData("cannot read " + std::string(what) + " " + path.string() + ": " +
                        (error != 0 ? std::strerror(error) : "it ended early (truncated while read?)"));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return contents;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  ExclusiveTemporary file(path);
  file.write(contents);
  file.commit();
}

AppendFile::AppendFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0) {
    if (errno == ELOOP) throw Error("cannot append to " + path_.string() + ": it is a symbolic link");
    fail("open", path_, errno);
  }
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode) || status.st_nlink != 1) {
    const bool regular = S_ISREG(status.st_mode);
    ::close(fd_);
    fd_ = -1;
    throw Error("cannot append to " + path_.string() + ": " +
                (regular ? "it has other hard links (a file someone else prepared)" : "it is not a regular file"));
  }
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
