#pragma once
// What a run leaves on disk besides checkpoints: metrics.csv (a row per iteration, appended as it
// goes), epochs.csv (a row per epoch) and summary.json.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sparsgd/torch/trainer.hpp"

namespace sparsgd::torch_layer {

extern const char* const kMetricsHeader;

// metrics.csv's row for one iteration.
std::string metrics_row(const IterationRecord& record);

// On resume: the rows of the earlier run's metrics.csv up to the checkpoint's own step, in a file
// written whole (the old one may be the same file). Rows after the checkpoint are dropped (the
// resumed run writes them again) and so is a torn or damaged line, such as the half row a SIGKILL
// leaves at the end: the metrics were made durable before each checkpoint was written, so every
// row the checkpoint covers is complete. Those rows must be there, each once and in order (steps
// 1 to last_step): a metrics file deleted, cut short, shuffled or with rows repeated is refused
// (InvalidData naming the file and the first step out of place), not spliced into a new run.
void restart_metrics(const std::filesystem::path& from, const std::filesystem::path& to, std::uint64_t last_step);

// epochs.csv, written whole (atomically) after each epoch.
void write_epochs(const std::filesystem::path& path, const std::vector<EpochResult>& history);

}  // namespace sparsgd::torch_layer
