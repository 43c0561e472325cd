#include "cli/torch_executable.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace sparsgd::cli {

bool needs_torch(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string command = argv[1];
  return command == "train" || (command == "bench" && argc >= 3 && std::string(argv[2]) == "select");
}

int exec_torch_executable(char** argv) {
#ifdef SPARSGD_TORCH_EXECUTABLE
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    std::fprintf(stderr, "sparsgd: error: cannot find this executable's directory (/proc/self/exe): %s\n",
                 error.message().c_str());
    return 2;
  }
  const std::string torch = (self.parent_path() / SPARSGD_TORCH_EXECUTABLE).string();
  execv(torch.c_str(), argv);
  std::fprintf(stderr, "sparsgd: error: cannot run %s, which holds the commands that need LibTorch: %s\n", torch.c_str(),
               std::strerror(errno));
  return 2;
#else
  std::fprintf(stderr, "sparsgd: error: this sparsgd was built without LibTorch (SPARSGD_WITH_TORCH=OFF): '%s' needs it\n",
               argv[1]);
  return 2;
#endif
}

}  // namespace sparsgd::cli
