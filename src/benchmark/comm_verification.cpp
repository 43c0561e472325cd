// The communication benchmark's check: every worker's sums and consumed entries, and (with
// gradients) final residuals, against one serial replay of all P workers of the same semantics.

#include "benchmark/comm_worker.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/replay.hpp"
#include "sparsgd/collectives/selection_replay.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/core/hash.hpp"
#include "sparsgd/core/synthetic.hpp"

namespace sparsgd::benchmark {
namespace {

struct Verification {
  bool matches = true;
  double conservation_rel_error = 0.0;
  std::string first_mismatch;
};

bool drawn_indices_shared(const CommBenchmarkOptions& o) {
  return collectives::find_aggregator(o.exchange.aggregator).properties.needs_shared_indices;
}

// What auto chose at iteration ii (the other aggregators leave it empty): the kept worker's method.
std::string_view step_method(const CheckedWorkers& checked, std::size_t ii) {
  std::string_view method;
  for (const auto& [w, record] : checked) {
    if (record->keep_results) method = record->results[ii].method;
  }
  return method;
}

// Iteration `it` of every checked worker against the replay's last step (an ExchangeReplay or a
// SelectionReplay): the kept worker's sum against the reference, every worker's sum digest against
// the kept one's, every worker's consumed entries against the reference's. Returns the kept sum.
template <class Replay>
const collectives::Aggregation* check_step(const Replay& replay, const CheckedWorkers& checked, int it,
                                           Verification& v) {
  auto mismatch = [&v](const std::string& what) {
    if (v.matches) v.first_mismatch = what;
    v.matches = false;
  };
  const auto ii = static_cast<std::size_t>(it);
  const collectives::Aggregation* kept = nullptr;
  std::uint64_t kept_digest = 0;
  for (const auto& [w, record] : checked) {
    if (!record->keep_results) continue;
    const std::string difference = replay.sum_difference(record->results[ii]);
    if (!difference.empty()) {
      mismatch("worker " + std::to_string(w) + " iteration " + std::to_string(it) +
               ": aggregated sum differs from the reference (" + difference + ")");
    }
    kept_digest = record->sum_digests[ii];
    kept = &record->results[ii];
  }
  for (const auto& [w, record] : checked) {
    if (record->sum_digests[ii] != kept_digest) {
      mismatch("worker " + std::to_string(w) + " iteration " + std::to_string(it) +
               ": its sum differs from the other workers'");
    }
    if (record->consumed[ii] != replay.reference().consumed[static_cast<std::size_t>(w)]) {
      mismatch("worker " + std::to_string(w) + " iteration " + std::to_string(it) +
               ": consumed entries differ from the reference");
    }
  }
  return kept;
}

// --selections drawn: the same checks against the reference of the drawn selections (regenerated
// here from the seed); there is no residual.
Verification verify_drawn(const CommBenchmarkOptions& o, int workers, const CheckedWorkers& checked) {
  Verification v;
  collectives::SelectionReplay replay(o.exchange.aggregator);
  const std::size_t k = k_from_density(o.n, o.exchange.density);
  std::vector<SparseVector> selections(static_cast<std::size_t>(workers));
  for (int it = 0; it < o.iters; ++it) {
    const auto ii = static_cast<std::size_t>(it);
    for (int w = 0; w < workers; ++w) {
      draw_selection(selections[static_cast<std::size_t>(w)], o.n, k, o.seed, w, ii, drawn_indices_shared(o));
    }
    replay.step(selections, k, step_method(checked, ii));
    const collectives::Aggregation* kept = check_step(replay, checked, it, v);
    if (kept != nullptr && it + 1 == o.iters) v.conservation_rel_error = replay.conservation_error(*kept);
  }
  return v;
}

// Replays all P workers serially (collectives/replay.hpp) and compares the workers in `checked`
// (all of them in-process; under MPI rank 0 has gathered them).
Verification verify_exchanges(const CommBenchmarkOptions& o, int workers, const CheckedWorkers& checked) {
  Verification v;
  collectives::ExchangeReplay replay(exchange_config(o), o.n, workers);
  const collectives::Aggregation* last_kept = nullptr;
  for (int it = 0; it < o.iters; ++it) {
    const auto iteration = static_cast<std::uint64_t>(it);
    replay.step(iteration, [&](int w, std::span<float> out) { fill_gradient(out, o.seed, w, iteration); },
                step_method(checked, static_cast<std::size_t>(it)));
    last_kept = check_step(replay, checked, it, v);
  }
  for (const auto& [w, record] : checked) {
    if (fnv1a(std::as_bytes(replay.residual(w))) != record->residual_digest) {
      if (v.matches) v.first_mismatch = "worker " + std::to_string(w) + ": final residual differs from the reference";
      v.matches = false;
    }
  }
  if (last_kept != nullptr) v.conservation_rel_error = replay.conservation_error(*last_kept);
  return v;
}

}  // namespace

void verify(const CommBenchmarkOptions& o, int workers, const CheckedWorkers& checked, CommReport& report) {
  const Verification v = o.drawn() ? verify_drawn(o, workers, checked) : verify_exchanges(o, workers, checked);
  report.matches = v.matches;
  report.first_mismatch = v.first_mismatch;
  report.conservation_rel_error = v.conservation_rel_error;
}

}  // namespace sparsgd::benchmark
