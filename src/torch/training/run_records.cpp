#include "run_records.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "run_state.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

#include <nlohmann/json.hpp>

namespace sparsgd::torch_layer {

namespace fs = std::filesystem;

const char* const kMetricsHeader =
    "epoch,step,loss,lr,density,bytes_sent,compute_s,compression_s,communication_s,simulated_s,wall_s\n";

void restart_metrics(const fs::path& from, const fs::path& to, std::uint64_t last_step) {
  std::string kept = kMetricsHeader;
  const auto refuse = [&](const std::string& why) {
    throw InvalidData("cannot resume the run's records: " + from.string() + " " + why + " (the checkpoint is at step " +
                      std::to_string(last_step) + ", and the rows up to it were on disk before it was written); "
                      "resume from an intact run directory");
  };
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(from, ec))) {
    if (last_step == 0) return write_file_atomically(to, kept);
    refuse("is missing");
  }
  // A run's rows: far below this even for millions of iterations; a FIFO or a device is refused.
  std::istringstream in(read_regular_file(from, std::uint64_t{4} << 30, "metrics file"));
  std::string line;
  std::getline(in, line);
  if (line + '\n' != kMetricsHeader) refuse("does not start with the metrics header");
  std::uint64_t expected = 1;
  while (expected <= last_step && std::getline(in, line)) {
    const bool torn = in.eof();  // no newline: the half row a kill leaves
    const auto comma = line.find(',');
    const auto next = comma == std::string::npos ? comma : line.find(',', comma + 1);
    std::uint64_t row_step = 0;
    const bool parsed = std::count(line.begin(), line.end(), ',') == 10 && next != std::string::npos &&
                        std::from_chars(line.data() + comma + 1, line.data() + next, row_step).ptr == line.data() + next;
    if (torn || !parsed) refuse("has a damaged row where step " + std::to_string(expected) + " should be");
    if (row_step != expected) {
      refuse("has step " + std::to_string(row_step) + " where step " + std::to_string(expected) + " should be");
    }
    kept += line + '\n';
    ++expected;
  }
  if (expected <= last_step) refuse("ends at step " + std::to_string(expected - 1));
  write_file_atomically(to, kept);
}

std::string metrics_row(const IterationRecord& r) {
  std::ostringstream row;
  row << r.epoch << ',' << r.step << ',' << r.loss << ',' << r.lr << ',' << r.density << ',' << r.bytes_sent << ','
      << r.compute_seconds << ',' << r.compression_seconds << ',' << r.communication_seconds << ','
      << r.simulated_seconds << ',' << r.wall_seconds << '\n';
  return row.str();
}

void write_epochs(const fs::path& path, const std::vector<EpochResult>& history) {
  std::ostringstream out;
  const EpochResult header;
  const char* separator = "";
  epoch_result_fields(header, [&](const char* name, const auto&) {
    out << separator << name;
    separator = ",";
  });
  out << '\n';
  for (const auto& e : history) {
    separator = "";
    epoch_result_fields(e, [&](const char*, const auto& value) {
      out << separator << value;
      separator = ",";
    });
    out << '\n';
  }
  write_file_atomically(path, out.str());
}

std::string to_json(const TrainSummary& s) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : s.history) {
    epochs.push_back({{"epoch", e.epoch},
                      {"iterations", e.iterations},
                      {"train_loss", e.train_loss},
                      {"test_loss", e.test_loss},
                      {"test_accuracy", e.test_accuracy},
                      {"test_perplexity", e.test_perplexity},
                      {"validation_loss", e.validation_loss},
                      {"validation_accuracy", e.validation_accuracy},
                      {"wall_seconds", e.wall_seconds},
                      {"simulated_seconds", e.simulated_seconds},
                      {"bytes_per_iteration", e.bytes_per_iteration}});
  }
  std::string compressor = s.compressor;
  if (s.r_factor > 0.0) {
    std::ostringstream r;
    r << s.compressor << "(r=" << s.r_factor << "k)";
    compressor = r.str();
  }
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [flag, value] : s.options) options[flag.substr(2)] = value;
  const nlohmann::json doc = {
      {"sparsgd", build_identity()},
      {"method", compressor + "+" + s.aggregator},
      {"r_factor", s.r_factor},
      {"task", s.task},
      {"metric", s.metric},
      {"model", s.model},
      {"optimizer", s.optimizer},
      {"parameters", s.parameters},
      {"compressor", s.compressor},
      {"aggregator", s.aggregator},
      {"network", s.network},
      {"workers", s.workers},
      {"epochs", s.epochs},
      {"iterations", s.iterations},
      {"density", s.density},
      {"final_train_loss", s.final_train_loss},
      {"final_test_loss", s.final_test_loss},
      {"final_test_accuracy", s.final_test_accuracy},
      {"final_test_perplexity", s.final_test_perplexity},
      {"final_validation_loss", s.final_validation_loss},
      {"final_validation_accuracy", s.final_validation_accuracy},
      {"error_feedback", s.error_feedback},
      {"auto", s.auto_network ? nlohmann::json{{"model_choice", s.auto_choice},
                                               {"settled", s.auto_settled},
                                               {"alpha_s", s.auto_network->alpha_seconds},
                                               {"seconds_per_byte", s.auto_network->seconds_per_byte},
                                               {"network_measured", s.auto_network->measured}}
                              : nlohmann::json()},
      {"options", options},
      {"bytes_per_worker_per_iteration", s.bytes_per_iteration},
      {"wall_seconds", s.wall_seconds},
      {"simulated_seconds", s.simulated_seconds},
      {"time_split_seconds",
       {{"compute", s.compute_seconds}, {"compression", s.compression_seconds}, {"communication", s.communication_seconds}}},
      {"resumed", s.resumed},
      {"resumed_at", s.resumed_at},
      {"skipped_steps", s.skipped_steps},
      {"memory",
       {{"estimate_bytes", s.memory.estimate_bytes},
        {"resident_before_bytes", s.memory.resident_before_bytes},
        {"peak_resident_bytes", s.memory.peak_resident_bytes}}},
      {"history", epochs}};
  return doc.dump();
}

}  // namespace sparsgd::torch_layer
