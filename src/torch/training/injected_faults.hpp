#pragma once
// The faults --inject-fault plants (sparsgd/core/fault_plan.hpp), for the reliability tests: where
// in an iteration each strikes and what it does.

#include <string>
#include <vector>

#include <torch/types.h>

#include "sparsgd/training/checkpoint.hpp"
#include "sparsgd/training/fault_plan.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::torch_layer {

// After the backward pass of `step` on `rank`: a NaN or Inf in the first gradient, a thrown error,
// or a hang that lasts until three timeouts have passed or (in-process) the others have given up.
void inject_fault_after_backward(const FaultPlan& fault, int rank, std::uint64_t step, int timeout_ms,
                                 transport::Transport& transport, std::vector<torch::Tensor> parameters);

// crash-checkpoint: half the checkpoint written to the temporary file, then the process dies.
[[noreturn]] void crash_while_writing(const std::string& path, const Checkpoint& checkpoint);

}  // namespace sparsgd::torch_layer
