#pragma once
// The commands that need LibTorch (train; bench select, for its torch.topk row) live in
// `sparsgd-torch`, beside `sparsgd`: see src/cli/CMakeLists.txt for why.

namespace sparsgd::cli {

// Whether argv names a command that needs LibTorch.
bool needs_torch(int argc, char** argv);

// Replaces this process with sparsgd-torch from the same directory, same arguments. Returns only
// on failure, having printed why; the caller exits with the status returned.
int exec_torch_executable(char** argv);

}  // namespace sparsgd::cli
