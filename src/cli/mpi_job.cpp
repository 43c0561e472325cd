#include "cli/mpi_job.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/core.h>

#ifdef SPARSGD_HAVE_MPI
#include "sparsgd/transport/mpi.hpp"
#endif

namespace sparsgd::cli {

namespace {

// A positive decimal number, or nothing.
std::optional<long> positive_decimal(const char* value) {
  if (value == nullptr) return std::nullopt;
  long number = 0;
  const char* end = value + std::strlen(value);
  const auto [at, ec] = std::from_chars(value, end, number);
  if (ec == std::errc() && at == end && number > 0) return number;
  return std::nullopt;
}

}  // namespace

MpiLaunch detect_mpi_launch() {
  MpiLaunch launch;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}) {
    if (const auto local = positive_decimal(std::getenv(name))) {
      launch.local_size = *local;
      break;
    }
  }
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    launch.launched = true;
    launch.variable = name;
    if (std::strcmp(name, "OMPI_COMM_WORLD_SIZE") == 0 || std::strcmp(name, "PMI_SIZE") == 0) {
      launch.size = positive_decimal(value).value_or(-1);
    }
    break;
  }
  return launch;
}

void run_mpi_job(std::chrono::milliseconds timeout, const std::string& command, std::optional<int> requested_workers,
                 const std::function<void(transport::Transport&)>& body) {
#ifdef SPARSGD_HAVE_MPI
  transport::MpiSession session(nullptr, nullptr);
  try {
    transport::MpiTransport t;
    t.set_timeout(timeout);
    const MpiLaunch launch = detect_mpi_launch();
    const std::string because =
        !launch.launched ? ""
        : launch.size > 0 ? fmt::format(" ({}={} is set)", launch.variable, launch.size)
                          : fmt::format(" ({} is set)", launch.variable);
    if (launch.size > 0 && launch.size != t.size()) {
      throw InvalidArgument(fmt::format(
          "{}={} announces a launch of {} ranks, but MPI started this process in a job of {}: a variable left over "
          "from another launch? Unset it to run in-process workers (--workers), or start the job with mpirun",
          launch.variable, launch.size, launch.size, t.size()));
    }
    if (requested_workers && *requested_workers != t.size()) {
      throw InvalidArgument(fmt::format(
          "--workers {} contradicts this MPI launch of {} ranks{}: under mpirun there is one worker per rank; leave "
          "--workers out, or start {} ranks",
          *requested_workers, t.size(), because, *requested_workers));
    }
    if (t.rank() == 0) {
      std::fprintf(stderr, "sparsgd %s: under mpirun%s: one worker per rank, %d workers\n", command.c_str(),
                   because.c_str(), t.size());
    }
    body(t);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // Transport errors already start with their rank; others get it here.
    const std::string prefix = fmt::format("rank {}: ", rank);
    const std::string message = e.what();
    std::fprintf(stderr, "sparsgd: error: %s%s\n", message.rfind(prefix, 0) == 0 ? "" : prefix.c_str(), message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
#else
  (void)timeout;
  (void)command;
  (void)requested_workers;
  (void)body;
  throw InvalidArgument("this sparsgd was built without MPI (SPARSGD_WITH_MPI=OFF)");
#endif
}

}  // namespace sparsgd::cli
