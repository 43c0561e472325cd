#include "injected_faults.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::torch_layer {
namespace {

void inject_gradient_fault(const FaultPlan& fault, std::vector<torch::Tensor>& parameters) {
  for (auto& parameter : parameters) {
    if (!parameter.grad().defined() || parameter.grad().numel() == 0) continue;
    parameter.mutable_grad().view({-1})[0] = fault.kind == FaultPlan::Kind::nan
                                                 ? std::numeric_limits<float>::quiet_NaN()
                                                 : std::numeric_limits<float>::infinity();
    return;
  }
}

}  // namespace

void inject_fault_after_backward(const FaultPlan& fault, int rank, std::uint64_t step, int timeout_ms,
                                 transport::Transport& transport, std::vector<torch::Tensor> parameters) {
  if (!fault.at(rank, step)) return;
  switch (fault.kind) {
    case FaultPlan::Kind::nan:
    case FaultPlan::Kind::inf: inject_gradient_fault(fault, parameters); break;
    case FaultPlan::Kind::thrown:
      throw Error("injected fault: worker " + std::to_string(rank) + " failed at iteration " + std::to_string(step));
    case FaultPlan::Kind::hang: {
      const auto until = std::chrono::steady_clock::now() + 3 * std::chrono::milliseconds(timeout_ms);
      while (std::chrono::steady_clock::now() < until && !transport.aborted()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      const std::string what = "worker " + std::to_string(rank) + " hung at iteration " + std::to_string(step);
      if (transport.aborted()) throw transport::PeerFailed("injected fault: " + what + " until the others gave up");
      throw Error("injected fault: " + what);
    }
    case FaultPlan::Kind::crash_checkpoint: break;
  }
}

[[noreturn]] void crash_while_writing(const std::string& path, const Checkpoint& ckpt) {
  const std::string bytes = encode_checkpoint(ckpt);
  // Half the file in the temporary a real write would use, left behind as a crash leaves it.
  try {
    ExclusiveTemporary torn(path);
    torn.write(std::string_view(bytes).substr(0, bytes.size() / 2));
    torn.abandon();
  } catch (const Error&) {
    // Nothing written: the crash still happens.
  }
  std::fprintf(stderr, "sparsgd: injected fault: dying while writing %s\n", path.c_str());
  std::fflush(stderr);
  std::_Exit(kCrashCheckpointExitStatus);
}

}  // namespace sparsgd::torch_layer
