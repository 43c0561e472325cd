#pragma once
// Runs one rank's part of an MPI job. MPI is initialized for the duration; an error on any rank
// is printed with the rank and ends the whole job (MPI_Abort), since the other ranks may be blocked
// on this one and must not hang.

#include <chrono>
#include <functional>

#include "sparsgd/core/error.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::cli {

void run_mpi_job(std::chrono::milliseconds timeout, const std::function<void(transport::Transport&)>& body);

}  // namespace sparsgd::cli
