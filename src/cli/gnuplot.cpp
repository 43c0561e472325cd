#include "cli/gnuplot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/core.h>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

extern char** environ;

namespace sparsgd::cli {
namespace fs = std::filesystem;

std::string gnuplot_text_literal(std::string_view text) {
  static constexpr std::string_view kPunctuation = " .,:;=+-_/()[]%#";
  std::string out = "'";
  for (const char c : text) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += alnum || kPunctuation.find(c) != std::string_view::npos ? c : '?';
  }
  return out + "'";
}

std::string gnuplot_datablock(std::string_view name, const std::vector<std::vector<double>>& rows) {
  for (const char c : name) {
    SPARSGD_ENFORCE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_',
                    "a gnuplot data block name is a program constant");
  }
  std::string out = fmt::format("${} << EOD\n", name);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += ' ';
      out += std::isfinite(row[i]) ? fmt::format("{}", row[i]) : std::string("NaN");
    }
    out += '\n';
  }
  return out + "EOD\n";
}

namespace {

// The executable `name` on PATH, or empty (what the shell's `command -v` finds, without a shell).
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const fs::path candidate = fs::path(dir.empty() ? "." : std::string(dir)) / name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate.string();
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

}  // namespace

void run_gnuplot(const fs::path& dir, const std::string& script_name, const std::string& script,
                 const std::string& log_name, const std::vector<std::string>& expected_outputs) {
  const std::string gnuplot = find_on_path("gnuplot");
  if (gnuplot.empty()) throw GnuplotMissing("gnuplot is not installed (install it with: apt-get install gnuplot-nox)");
  write_file_atomically(dir / script_name, script);
  for (const auto& name : expected_outputs) fs::remove(dir / name);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Relative names below are taken in `dir`: the script names only files the program chose.
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The log goes to a file of its own making, renamed onto log_name afterwards: never through a link.
  ExclusiveTemporary log(dir / log_name);
  posix_spawn_file_actions_adddup2(&actions, log.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log.fd(), STDERR_FILENO);
  std::string arg0 = "gnuplot", arg1 = script_name;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw Error(fmt::format("cannot run {}: {}", gnuplot, std::strerror(spawned)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("cannot wait for gnuplot: {}", std::strerror(errno)));
  }
  log.commit();
  const fs::path script_path = dir / script_name, log_path = dir / log_name;
  // No empty or torn image is left behind to pass for a result.
  const auto remove_outputs = [&] {
    std::error_code ignored;
    for (const auto& name : expected_outputs) fs::remove(dir / name, ignored);
  };
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    remove_outputs();
    throw Error(fmt::format("gnuplot failed on {} ({}; see {})", script_path.string(),
                            WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WTERMSIG(status)),
                            log_path.string()));
  }
  for (const auto& name : expected_outputs) {
    std::error_code error;
    const auto size = fs::file_size(dir / name, error);
    if (error || size == 0) {
      remove_outputs();
      throw Error(fmt::format("gnuplot did not write {} (see {})", (dir / name).string(), log_path.string()));
    }
  }
}

}  // namespace sparsgd::cli
