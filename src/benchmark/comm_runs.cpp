// The communication benchmark's runs: P workers as threads of this process, or one per MPI rank
// with every rank's record gathered at rank 0, which verifies them all against one serial replay.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "benchmark/comm_worker.hpp"
#include "collectives/blocks/tags.hpp"
#include "sparsgd/transport/local.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace sparsgd::benchmark {
namespace {

// Whether MPI_Wtime is one clock for all ranks: under SimGrid SMPI it is the simulator's; on a
// real cluster every machine has its own, so spans between ranks mean nothing there.
#ifdef SPARSGD_SMPI
constexpr bool kGlobalMpiClock = true;
#else
constexpr bool kGlobalMpiClock = false;
#endif

// Gathers a vector of doubles (the same length everywhere) at rank 0.
std::vector<std::vector<double>> gather(transport::Transport& t, const std::vector<double>& mine, int tag) {
  std::vector<std::vector<double>> all;
  std::vector<std::byte> buffer;
  const std::size_t bytes = mine.size() * sizeof(double);
  if (t.rank() == 0) {
    all.push_back(mine);
    for (int r = 1; r < t.size(); ++r) {
      if (t.recv(r, tag, buffer, bytes) != bytes) throw transport::TransportError("bad report message");
      std::vector<double> v(mine.size());
      std::memcpy(v.data(), buffer.data(), bytes);
      all.push_back(std::move(v));
    }
  } else {
    t.send(0, tag, std::as_bytes(std::span(mine)));
  }
  return all;
}

// What rank 0 needs of another rank to check it: per iteration the digest of its sum and its
// consumed flags, then the digest of its final residual. As u64 words: digest, count, the flags
// (count bytes, padded to a word) per iteration, then the residual digest.
std::vector<std::uint64_t> encode_checked(const WorkerRecord& r) {
  std::vector<std::uint64_t> words;
  for (std::size_t it = 0; it < r.sum_digests.size(); ++it) {
    const auto& flags = r.consumed[it];
    words.push_back(r.sum_digests[it]);
    words.push_back(flags.size());
    const std::size_t at = words.size();
    words.resize(at + (flags.size() + 7) / 8, 0);
    if (!flags.empty()) std::memcpy(words.data() + at, flags.data(), flags.size());
  }
  words.push_back(r.residual_digest);
  return words;
}

WorkerRecord decode_checked(std::span<const std::byte> bytes, int iters, std::size_t n, int from) {
  auto bad = [from] { return transport::TransportError("bad verification message from rank " + std::to_string(from)); };
  if (bytes.size() % 8 != 0) throw bad();
  std::vector<std::uint64_t> words(bytes.size() / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  WorkerRecord r;
  std::size_t at = 0;
  for (int it = 0; it < iters; ++it) {
    if (words.size() - at < 3) throw bad();
    r.sum_digests.push_back(words[at]);
    const std::uint64_t count = words[at + 1];
    at += 2;
    if (count > n || (count + 7) / 8 > words.size() - at - 1) throw bad();
    std::vector<std::uint8_t> flags(count);
    if (count > 0) std::memcpy(flags.data(), words.data() + at, count);
    r.consumed.push_back(std::move(flags));
    at += (count + 7) / 8;
  }
  if (words.size() - at != 1) throw bad();
  r.residual_digest = words[at];
  return r;
}

// Every rank's record at rank 0, its own first; the other ranks get nothing back.
std::vector<WorkerRecord> gather_checked(transport::Transport& t, WorkerRecord&& mine, const CommBenchmarkOptions& o, int tag) {
  std::vector<WorkerRecord> all;
  if (t.rank() != 0) {
    const auto words = encode_checked(mine);
    t.send(0, tag, std::as_bytes(std::span(words)));
    return all;
  }
  all.push_back(std::move(mine));
  std::vector<std::byte> buffer;
  const std::size_t max_bytes = 8 * (1 + static_cast<std::size_t>(o.iters) * (2 + (o.n + 7) / 8));
  for (int r = 1; r < t.size(); ++r) {
    t.recv(r, tag, buffer, max_bytes);
    all.push_back(decode_checked(buffer, o.iters, o.n, r));
  }
  return all;
}

// The report of one run's in-process workers.
CommReport local_report(const CommBenchmarkOptions& o, const std::vector<WorkerRecord>& records) {
  CommReport report;
  for (const WorkerRecord& rec : records) {
    report.wall_ms.push_back(rec.wall_ms);
    report.agg_ms.push_back(rec.agg_ms);
    report.agg_cpu_ms.push_back(rec.agg_cpu_ms);
    report.agg_minor_faults.push_back(rec.agg_minor_faults);
    report.compress_ms.push_back(rec.compress_ms);
    report.sim_ms.push_back(rec.sim_ms);
    report.sim_ready_ms.push_back(rec.sim_ready_ms);
    report.sim_summed_ms.push_back(rec.sim_summed_ms);
    report.clock_start_s.push_back(rec.clock_start_s);
    report.clock_end_s.push_back(rec.clock_end_s);
    report.counters.push_back(rec.counters);
  }
  report.global_clock = true;  // steady_clock, one process
  report.auto_decision = records[0].auto_decision;
  if (o.verify) {
    CheckedWorkers checked;
    for (std::size_t w = 0; w < records.size(); ++w) checked.emplace_back(static_cast<int>(w), &records[w]);
    verify(o, static_cast<int>(records.size()), checked, report);
  }
  return report;
}

}  // namespace

std::vector<CommReport> run_local(const CommBenchmarkOptions& o, const MemoryEstimate& memory) {
  const double resident_before = resident_bytes();
  const transport::NetworkSpec network = transport::parse_network(o.exchange.network);
  std::vector<CommBenchmarkOptions> options = {o};
  if (!o.interleave.empty()) options.push_back(interleaved_options(o));
  // [run][worker]
  std::vector<std::vector<WorkerRecord>> records(options.size(), std::vector<WorkerRecord>(static_cast<std::size_t>(o.workers)));
  for (auto& run : records) run[0].keep_results = true;
  transport::run_local_workers(
      o.workers,
      [&](transport::Transport& t) {
        std::vector<Pipeline> pipelines;
        for (std::size_t i = 0; i < options.size(); ++i) {
          pipelines.push_back({&options[i], &records[i][static_cast<std::size_t>(t.rank())]});
        }
        run_worker(pipelines, network, t);
      },
      std::chrono::milliseconds(o.timeout_ms));
  std::vector<CommReport> reports;
  for (std::size_t i = 0; i < options.size(); ++i) reports.push_back(local_report(options[i], records[i]));
  // After the verification, whose replay may need more than the workers did. One process: its
  // memory is both runs' (the same figures in both reports).
  const MemoryUse memory_use{memory.total(), resident_before, peak_resident_bytes()};
  for (CommReport& report : reports) report.memory = memory_use;
  return reports;
}

// Rank 0 checks every rank against one serial replay of all of them (the replay holds P
// residuals of n floats, so it is done once, not on every rank); the others send it their digests
// and consumed flags and it alone reports.
std::optional<CommReport> run_rank(transport::Transport& t, const CommBenchmarkOptions& o, const MemoryEstimate& memory) {
  const double resident_before = resident_bytes();
  const transport::NetworkSpec network = transport::parse_network(o.exchange.network);
  WorkerRecord record;
  record.keep_results = t.rank() == 0;
  run_worker({{&o, &record}}, network, t);
  std::vector<double> summary = {static_cast<double>(record.counters.bytes_sent),
                                 static_cast<double>(record.counters.messages_sent)};
  for (auto* series : {&record.wall_ms, &record.sim_ms, &record.sim_ready_ms, &record.sim_summed_ms, &record.agg_ms,
                       &record.agg_cpu_ms, &record.compress_ms, &record.clock_start_s, &record.clock_end_s,
                       &record.agg_minor_faults}) {
    series->resize(static_cast<std::size_t>(o.iters), 0.0);
    summary.insert(summary.end(), series->begin(), series->end());
  }
  const collectives::TagBlock tags = collectives::tag_block(collectives::TagUser::benchmark_harness);
  const auto all = gather(t, summary, tags[collectives::tag_offsets::kHarnessSummary]);
  const std::optional<collectives::AutoDecision> auto_decision = record.auto_decision;
  std::vector<WorkerRecord> records;
  if (o.verify) records = gather_checked(t, std::move(record), o, tags[collectives::tag_offsets::kHarnessRecords]);
  if (t.rank() != 0) return std::nullopt;
  CommReport report;
  const auto iters = static_cast<std::size_t>(o.iters);
  for (const auto& s : all) {
    transport::TrafficCounters c;
    c.bytes_sent = static_cast<std::uint64_t>(s[0]);
    c.messages_sent = static_cast<std::uint64_t>(s[1]);
    report.counters.push_back(c);
    auto series = [&s, iters](std::size_t which) {
      const auto begin = s.begin() + 2 + static_cast<std::ptrdiff_t>(which * iters);
      return std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(iters));
    };
    report.wall_ms.push_back(series(0));
    report.agg_ms.push_back(series(4));
    report.agg_cpu_ms.push_back(series(5));
    report.compress_ms.push_back(series(6));
    if (network.enabled()) {
      report.sim_ms.push_back(series(1));
      report.sim_ready_ms.push_back(series(2));
      report.sim_summed_ms.push_back(series(3));
    }
    report.clock_start_s.push_back(series(7));
    report.clock_end_s.push_back(series(8));
    report.agg_minor_faults.push_back(series(9));
  }
  report.global_clock = kGlobalMpiClock;
  report.auto_decision = auto_decision;
  if (o.verify) {
    std::vector<std::pair<int, const WorkerRecord*>> checked;
    for (int w = 0; w < t.size(); ++w) checked.emplace_back(w, &records[static_cast<std::size_t>(w)]);
    verify(o, t.size(), checked, report);
  }
  report.memory = {memory.total(), resident_before, peak_resident_bytes()};
  return report;
}


}  // namespace sparsgd::benchmark
