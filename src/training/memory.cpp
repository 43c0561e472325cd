#include "sparsgd/training/memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sparsgd {
namespace {

// The first number on the line of /proc/<file> that starts with `key`, in kB.
std::optional<double> proc_kib(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    double kib = 0;
    if (fields >> kib) return kib;
  }
  return std::nullopt;
}

std::optional<double> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value >= 0) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// This process's cgroup directory under `root` for `controller` ("" for v2), from /proc/self/cgroup.
std::string cgroup_dir(const std::string& root, const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    const bool match = controller.empty() ? controllers.empty() : ("," + controllers + ",").find("," + controller + ",") != std::string::npos;
    if (match) return root + path;
  }
  return root;
}

// Limit less usage of the cgroup, trying this process's own cgroup directory, then the mount's
// root (inside a container the root is the container's cgroup).
std::optional<double> cgroup_room(const std::string& own_dir, const std::string& root_dir, const char* limit_file,
                                  const char* usage_file) {
  for (const std::string& dir : {own_dir, root_dir}) {
    const auto limit = read_number(dir + "/" + limit_file);
    const auto usage = read_number(dir + "/" + usage_file);
    // cgroup v1 writes "no limit" as a huge number near 2^63.
    if (limit && usage && *limit < 1e18) return std::max(0.0, *limit - *usage);
    if (limit || usage) return std::nullopt;  // the files exist: no limit set
  }
  return std::nullopt;
}

}  // namespace

std::optional<MemoryAvailable> available_memory() {
  std::optional<MemoryAvailable> best;
  auto consider = [&best](std::optional<double> bytes, const std::string& source) {
    if (bytes && (!best || *bytes < best->bytes)) best = MemoryAvailable{*bytes, source};
  };
  if (const auto kib = proc_kib("/proc/meminfo", "MemAvailable:")) consider(*kib * 1024.0, "MemAvailable in /proc/meminfo");
  consider(cgroup_room(cgroup_dir("/sys/fs/cgroup", ""), "/sys/fs/cgroup", "memory.max", "memory.current"),
           "the cgroup's memory.max less its memory.current");
  consider(cgroup_room(cgroup_dir("/sys/fs/cgroup/memory", "memory"), "/sys/fs/cgroup/memory",
                       "memory.limit_in_bytes", "memory.usage_in_bytes"),
           "the cgroup's memory.limit_in_bytes less its usage");
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const auto vm_kib = proc_kib("/proc/self/status", "VmSize:");
    const double used = vm_kib ? *vm_kib * 1024.0 : 0.0;
    consider(std::max(0.0, static_cast<double>(limit.rlim_cur) - used),
             "the address-space limit (ulimit -v " + std::to_string(limit.rlim_cur / 1024) +
                 ") less this process's current size");
  }
  return best;
}

double MemoryEstimate::total() const {
  double sum = 0;
  for (const auto& p : parts) sum += p.bytes;
  return sum;
}

std::string MemoryEstimate::describe() const {
  std::string text = format_bytes(total()) + " (";
  bool first = true;
  for (const auto& p : parts) {
    if (p.bytes <= 0) continue;
    text += (first ? "" : "; ") + p.what + ": " + format_bytes(p.bytes);
    first = false;
  }
  return text + ")";
}

void require_memory(const std::string& command, const MemoryEstimate& estimate, const std::string& advice) {
  const auto available = available_memory();
  if (!available || estimate.total() <= available->bytes) return;
  throw ResourceExhausted(command + " needs about " + estimate.describe() + ", but only " +
                          format_bytes(available->bytes) + " is available (" + available->source + ")" +
                          (advice.empty() ? "" : ": " + advice));
}

double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  if (!(in >> pages_total >> pages_resident)) return 0;
  return pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double peak_resident_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // kB on Linux
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 5) {
    bytes /= 1024.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

}  // namespace sparsgd
