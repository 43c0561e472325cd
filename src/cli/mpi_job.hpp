#pragma once
// Runs one rank's part of an MPI job. MPI is initialized for the duration; an error on any rank
// is printed with the rank and ends the whole job (MPI_Abort), since the other ranks may be blocked
// on this one and must not hang.
//
// Whether a command runs under mpirun is read from the launcher's variables; what was decided is
// said on stderr, and a launch that contradicts itself is refused: a variable left over from
// another launch (it announces N ranks, MPI starts a job of another size) or an explicit
// --workers that differs from the number of ranks.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::cli {

struct MpiLaunch {
  bool launched = false;  // a launcher's variable is set
  std::string variable;   // the first one found, e.g. OMPI_COMM_WORLD_SIZE
  long size = -1;         // the world size it announces (-1: that variable does not say)
  long local_size = 1;    // ranks on this machine (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS), for memory
};

// Open MPI (OMPI_COMM_WORLD_SIZE), MPICH/Hydra (PMI_SIZE), PMIx launchers (PMIX_RANK) and others
// (MPI_LOCALNRANKS). A size that is not a decimal number counts as not said.
MpiLaunch detect_mpi_launch();

// command: what runs ("train", "bench comm"), for the messages. requested_workers: --workers if
// the user gave it explicitly (under MPI there is one worker per rank).
void run_mpi_job(std::chrono::milliseconds timeout, const std::string& command, std::optional<int> requested_workers,
                 const std::function<void(transport::Transport&)>& body);

}  // namespace sparsgd::cli
