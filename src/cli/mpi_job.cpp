#include "cli/mpi_job.hpp"

#include <cstdio>

#ifdef SPARSGD_HAVE_MPI
#include "sparsgd/transport/mpi.hpp"
#endif

namespace sparsgd::cli {

void run_mpi_job(std::chrono::milliseconds timeout, const std::function<void(transport::Transport&)>& body) {
#ifdef SPARSGD_HAVE_MPI
  transport::MpiSession session(nullptr, nullptr);
  try {
    transport::MpiTransport t;
    t.set_timeout(timeout);
    body(t);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "sparsgd: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
#else
  (void)timeout;
  (void)body;
  throw InvalidArgument("this sparsgd was built without MPI (SPARSGD_WITH_MPI=OFF)");
#endif
}

}  // namespace sparsgd::cli
