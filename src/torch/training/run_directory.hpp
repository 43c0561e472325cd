#pragma once
// A run directory belongs to one run at a time, and a finished run is not replaced by accident.

#include <filesystem>

namespace sparsgd::torch_layer {

class RunDirectoryClaim {
 public:
  // Creates `dir` if needed and locks it (DIR/.lock, an exclusive flock held until destruction,
  // released by the kernel however the process ends): a second run on it fails at once, naming the
  // process that holds it. Unless `continuing` (a --resume into the same directory), a directory
  // that holds a run (metrics.csv, epochs.csv, summary.json or checkpoints/) is refused, naming
  // --resume and --overwrite; with `overwrite` that run's files are removed first.
  // Throws InvalidArgument.
  RunDirectoryClaim(const std::filesystem::path& dir, bool continuing, bool overwrite);
  ~RunDirectoryClaim();
  RunDirectoryClaim(const RunDirectoryClaim&) = delete;
  RunDirectoryClaim& operator=(const RunDirectoryClaim&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace sparsgd::torch_layer
