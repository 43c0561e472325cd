#pragma once
// Where a worker of `sparsgd train` computes: --device cpu (the default), cuda (each worker a GPU
// of its own where there are enough, in turn where there are not; under mpirun each rank the GPU
// of its local rank) or cuda:N (every worker on GPU N).

#include <string>

#include <torch/types.h>

namespace sparsgd::torch_layer {

// Throws InvalidArgument, in one line, for a value that is not cpu, cuda or cuda:N, and for a GPU
// this process cannot see (none at all, or N past the last).
void check_device(const std::string& device);

// The device of worker `rank` (its in-process index, or its MPI rank: the local rank is read from
// the launcher's environment, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID).
torch::Device worker_device(const std::string& device, int rank);

}  // namespace sparsgd::torch_layer
