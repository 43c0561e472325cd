#include "run_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

namespace fs = std::filesystem;

namespace {

// What a run leaves in its directory (trainer.cpp, run_records.cpp, the plots).
bool is_run_file(const fs::path& name) {
  const std::string n = name.string();
  return n == "metrics.csv" || n == "epochs.csv" || n == "summary.json" || n == "checkpoints" ||
         n == "plots.gnuplot" || n == "plots.log" || name.extension() == ".png";
}

std::string holder_of(int fd) {
  char text[64] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  const std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  return pid.empty() ? std::string("another process") : "process " + pid.substr(0, pid.find('\n'));
}

}  // namespace

RunDirectoryClaim::RunDirectoryClaim(const fs::path& dir, bool continuing, bool overwrite) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InvalidArgument("cannot create the run directory " + dir.string() + ": " + ec.message());
  const fs::path lock = dir / ".lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0) throw InvalidArgument("cannot lock the run directory " + dir.string() + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    throw InvalidArgument("the run directory " + dir.string() + " is in use by " + holder +
                          " (another run on it); wait for it to end, or pass another --out");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the note; only the message naming the holder would be vaguer.
  }
  if (continuing) return;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (is_run_file(entry.path().filename())) found.push_back(entry.path());
  }
  if (found.empty()) return;
  // Named by what matters most: its records, then its checkpoints, then the rest.
  const auto rank = [](const fs::path& p) {
    const std::string n = p.filename().string();
    return n == "metrics.csv" ? 0 : n == "checkpoints" ? 1 : n == "summary.json" ? 2 : n == "epochs.csv" ? 3 : 4;
  };
  std::sort(found.begin(), found.end(), [&](const fs::path& a, const fs::path& b) { return rank(a) < rank(b); });
  if (!overwrite) {
    ::close(fd_);
    fd_ = -1;
    throw InvalidArgument("the run directory " + dir.string() + " holds a run already (" +
                          found.front().filename().string() + (found.size() > 1 ? ", ..." : "") +
                          "): pass --resume " + dir.string() + " to continue it, --overwrite to replace it, or another "
                          "--out");
  }
  for (const auto& path : found) {
    fs::remove_all(path, ec);
    if (ec) throw InvalidArgument("--overwrite: cannot remove " + path.string() + ": " + ec.message());
  }
}

RunDirectoryClaim::~RunDirectoryClaim() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace sparsgd::torch_layer
