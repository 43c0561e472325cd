// auto (auto_select.hpp): the descriptors' closed forms propose, timed trials decide.

#include "sparsgd/collectives/auto_select.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/tags.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/core/error.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& auto_aggregator();
// auto may hold Ok-Topk's buffers while it tries it (its footprint below).
const AggregatorDescriptor& oktopk_aggregator();

namespace {

constexpr std::array<std::size_t, 6> kPingSizes = {0, 1024, 16384, 131072, 524288, 1048576};
constexpr int kPingRepeats = 5;  // the fastest of these, after one warm-up round trip

CostQuery query_for(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding, const NetworkEstimate& net,
                    const AggregatorDescriptor& d) {
  CostQuery q;
  q.workers = workers;
  q.n = n;
  q.k = k;
  q.coding = d.properties.sends_indices ? coding : wire::IndexCoding::raw;
  q.alpha_seconds = net.alpha_seconds;
  q.seconds_per_byte = net.seconds_per_byte;
  return q;
}

// The fastest timed candidate (the first of equals); trials.size() when none was timed.
std::size_t fastest_trial(const std::vector<AutoTrial>& trials) {
  std::size_t fastest = trials.size();
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].runs > 0 && (fastest == trials.size() || trials[i].measured_seconds < trials[fastest].measured_seconds)) {
      fastest = i;
    }
  }
  return fastest;
}

// The fastest timed candidate's time; infinity when none was timed.
double fastest_timed_seconds(const std::vector<AutoTrial>& trials) {
  const std::size_t fastest = fastest_trial(trials);
  return fastest == trials.size() ? std::numeric_limits<double>::infinity() : trials[fastest].measured_seconds;
}

class AutoAggregator final : public DescribedAggregator<auto_aggregator> {
 public:
  explicit AutoAggregator(const AggregatorOptions& options) : options_(options) { decision_.network = options.network; }

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    if (!decision_.network.known) decision_.network = measure_network(t);
    Settlement& s = settlement_for(t.size(), local.dim, k);
    if (!s.settled.empty() && s.retrial_interval > 0 && s.settled_calls == s.retrial_interval) begin_retrial(s);
    AutoTrial* trial = s.settled.empty() ? &s.trials[s.order[s.next]] : nullptr;
    const std::string_view choice = trial != nullptr ? trial->aggregator : s.settled;
    // Only a trial reads the clock: on the simulated network a read is a thread-CPU-time system call
    // (about 1.4 us on a VM), which the settled exchanges would be charged for: 1-2% of an exchange
    // of 90 us (P = 4, n = 1M, density 0.001, 10gbe; bench comm --interleave).
    const double start = trial != nullptr ? t.clock_seconds() : 0.0;
    made(choice).aggregate(t, local, k, out);
    out.method = choice;
    decision_.last_choice = choice;
    if (trial != nullptr) {
      // The first kAutoWarmupRounds rounds warm each candidate up untimed (auto_select.hpp): its
      // warm-up would otherwise count against it.
      if (s.round >= kAutoWarmupRounds) {
        // From the last rank starting to the last one finishing, which every rank learns, so every
        // rank settles on the same candidate. (A rank that started early and waited for the others
        // would otherwise count the others' compression. Across machines whose clocks differ by an
        // offset it tends to the span of the rank whose clock is ahead, the same for every candidate.)
        std::array<double, 2> span{std::max(0.0, start), std::max(0.0, t.clock_seconds())};
        allreduce_max(t, span);
        record_timed_run(*trial, std::max(0.0, span[1] - span[0]));
        ++decision_.timed_exchanges;
      }
      ++decision_.trial_exchanges;
      ++s.spent;
      if (++s.next == s.order.size()) end_round(s);
    } else {
      ++s.settled_calls;
    }
    ++exchanges_;
    // The report follows the last (n, k) met; copied only when it changed, not every exchange.
    if (trial != nullptr || &s != reported_) {
      decision_.settled = s.settled;
      decision_.model_choice = s.model_choice;
      decision_.trials = s.trials;
      decision_.timed_rounds = timed_trial_rounds(s.trials.size(), options_.auto_trial_rounds);
      decision_.first_settled_after = s.first_settled_after;
      reported_ = &s;
    }
  }

  const AutoDecision& decision() const { return decision_; }

 private:
  struct Settlement {
    std::vector<AutoTrial> trials;  // cheapest closed form first; at a re-trial, those run again
    std::string_view model_choice;  // the closed forms' cheapest
    std::string_view settled;       // empty while trying
    std::vector<std::size_t> order;  // the trials this round runs, in turn: all, or the contested ones
    std::size_t next = 0;            // the position in `order` to run next
    int round = 0;
    std::uint64_t spent = 0;  // exchanges of these trials so far, warm-ups included
    std::uint64_t settled_calls = 0;     // since it last settled
    std::uint64_t retrial_interval = 0;  // settled calls before the next trials; 0: never
    std::uint64_t first_settled_after = 0;
  };

  // A round of trials is over. After the warm-ups and the timed rounds asked for, the candidates
  // whose times still overlap the fastest's (contested_candidates) run again, timed, while the
  // trial budget holds a whole round of them; then the trials settle.
  void end_round(Settlement& s) {
    s.next = 0;
    ++s.round;
    if (s.round < kAutoWarmupRounds + timed_trial_rounds(s.trials.size(), options_.auto_trial_rounds)) return;
    const std::vector<std::size_t> contested = contested_candidates(s.trials);
    if (!contested.empty() && s.spent + contested.size() <= auto_trial_budget(options_.auto_trial_rounds)) {
      s.order = contested;
      return;
    }
    s.settled = settled_choice(s.trials);
    s.settled_calls = 0;
    const bool first = s.retrial_interval == 0;
    s.retrial_interval = first ? kAutoRetrialFirst : std::min(2 * s.retrial_interval, kAutoRetrialMost);
    if (first) s.first_settled_after = exchanges_ + 1;  // this call was its last trial
    release_unsettled();
  }

  // The settled choice's interval is over: the candidates whose last trial was within kRetrialFactor
  // of the fastest run their trials again (warm-ups included: those not chosen were freed), every
  // rank alike (the same calls, the same max-reduced times). The interval doubles either way.
  void begin_retrial(Settlement& s) {
    const double fastest_seconds = fastest_timed_seconds(s.trials);
    std::vector<AutoTrial> again;
    for (const AutoTrial& trial : s.trials) {
      if (trial.runs > 0 && trial.measured_seconds <= kRetrialFactor * fastest_seconds) {
        again.push_back({trial.aggregator, trial.model_seconds});
      }
    }
    s.settled_calls = 0;
    if (again.size() < 2) {
      s.retrial_interval = std::min(2 * s.retrial_interval, kAutoRetrialMost);
      return;
    }
    s.trials = std::move(again);
    start_trials(s);
    ++decision_.retrials;
  }

  static void start_trials(Settlement& s) {
    s.settled = {};
    s.order.resize(s.trials.size());
    for (std::size_t i = 0; i < s.order.size(); ++i) s.order[i] = i;
    s.next = 0;
    s.round = 0;
    s.spent = 0;
  }

  Settlement& settlement_for(int workers, std::size_t n, std::size_t k) {
    const auto [it, inserted] = settlements_.try_emplace({workers, n, k});
    Settlement& s = it->second;
    if (inserted) {
      s.trials = plausible_candidates(workers, n, k, options_.index_coding, decision_.network);
      s.model_choice = s.trials.front().aggregator;
      start_trials(s);
      if (options_.auto_trial_rounds == 0 || s.trials.size() == 1) {
        s.settled = s.model_choice;  // for good: retrial_interval stays 0
        s.first_settled_after = exchanges_;
      }
    }
    return s;
  }

  // Frees the candidates no settled (n, k) uses; one still trying keeps them all.
  void release_unsettled() {
    for (const auto& [key, s] : settlements_) {
      if (s.settled.empty()) return;
    }
    std::erase_if(made_, [this](const auto& entry) {
      for (const auto& [key, s] : settlements_) {
        if (s.settled == entry.first) return false;
      }
      return true;
    });
  }

  Aggregator& made(std::string_view choice) {
    auto& chosen = made_[choice];
    if (!chosen) {
      AggregatorOptions options = options_;
      if (!find_aggregator(choice).properties.sends_indices) options.index_coding = wire::IndexCoding::raw;
      chosen = find_aggregator(choice).make(options);
    }
    return *chosen;
  }

  AggregatorOptions options_;
  AutoDecision decision_;
  std::map<std::string_view, std::unique_ptr<Aggregator>> made_;
  std::map<std::tuple<int, std::size_t, std::size_t>, Settlement> settlements_;
  const Settlement* reported_ = nullptr;  // whose state decision_ shows (std::map: stable addresses)
  std::uint64_t exchanges_ = 0;           // calls, over every (n, k)
};

ReferenceAggregation no_reference(const std::vector<SparseVector>&, std::size_t) {
  throw InvalidArgument(
      "auto has no reference of its own: its result is that of the aggregator it chose (Aggregation::method)");
}

CommCost cheapest_cost(const CostQuery& q) {
  const NetworkEstimate net{q.alpha_seconds, q.seconds_per_byte, true, false};
  const AggregatorDescriptor& d = find_aggregator(cheapest_aggregator(q.workers, q.n, q.k, q.coding, net));
  return d.cost(query_for(q.workers, q.n, q.k, q.coding, net, d));
}

}  // namespace

void record_timed_run(AutoTrial& trial, double seconds) {
  if (trial.runs == 0 || seconds < trial.measured_seconds) {
    trial.second_seconds = trial.runs == 0 ? -1.0 : trial.measured_seconds;
    trial.measured_seconds = seconds;
  } else if (trial.runs == 1 || seconds < trial.second_seconds) {
    trial.second_seconds = seconds;
  }
  ++trial.runs;
}

std::uint64_t auto_trial_budget(int trial_rounds) {
  return auto_candidates().size() * static_cast<std::uint64_t>(kAutoWarmupRounds + std::max(0, trial_rounds));
}

int timed_trial_rounds(std::size_t candidates, int trial_rounds) {
  if (trial_rounds <= 0 || candidates < 2) return std::max(0, trial_rounds);
  // What each candidate's share of the budget holds once one contested round is set aside.
  const std::uint64_t share = auto_trial_budget(trial_rounds) / candidates;
  const auto affordable = static_cast<int>(share) - 1 - kAutoWarmupRounds;
  return std::max(trial_rounds, affordable);
}

std::vector<std::size_t> contested_candidates(const std::vector<AutoTrial>& trials) {
  const std::size_t fastest = fastest_trial(trials);
  if (fastest == trials.size()) return {};
  // With one run the fastest's floor has nothing to confirm it against: its own time stands in.
  const AutoTrial& w = trials[fastest];
  const double confirmed = w.runs >= 2 ? w.second_seconds : w.measured_seconds;
  std::vector<std::size_t> contested;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (i == fastest || (trials[i].runs > 0 && trials[i].measured_seconds < confirmed)) contested.push_back(i);
  }
  if (contested.size() < 2) contested.clear();
  return contested;
}

bool beaten_twice(const AutoTrial& fastest, const AutoTrial& other) {
  return fastest.runs >= 2 && other.runs > 0 && fastest.second_seconds <= other.measured_seconds;
}

std::string_view settled_choice(const std::vector<AutoTrial>& trials) {
  SPARSGD_ENFORCE(!trials.empty(), "settled_choice needs at least one candidate");
  const std::size_t index = fastest_trial(trials);
  if (index == trials.size()) return trials.front().aggregator;  // none timed: the closed forms' choice
  const AutoTrial& fastest = trials[index];
  for (const AutoTrial& trial : trials) {
    if (&trial == &fastest) return trial.aggregator;
    const bool within_tie = trial.runs > 0 && trial.measured_seconds <= fastest.measured_seconds * (1.0 + kTrialTieTolerance);
    if (within_tie && !beaten_twice(fastest, trial)) return trial.aggregator;
  }
  return fastest.aggregator;
}

const std::vector<std::string_view>& auto_candidates() {
  static const std::vector<std::string_view> candidates = [] {
    std::vector<const AggregatorDescriptor*> ranked;
    for (const AggregatorDescriptor* d : aggregator_descriptors()) {
      if (d->properties.auto_rank > 0) ranked.push_back(d);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const AggregatorDescriptor* a, const AggregatorDescriptor* b) {
      return a->properties.auto_rank < b->properties.auto_rank;
    });
    std::vector<std::string_view> names;
    for (const AggregatorDescriptor* d : ranked) names.push_back(d->name);
    return names;
  }();
  return candidates;
}

std::vector<AutoTrial> plausible_candidates(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding,
                                            const NetworkEstimate& network) {
  std::vector<AutoTrial> all;
  for (const std::string_view name : auto_candidates()) {
    const AggregatorDescriptor& d = find_aggregator(name);
    all.push_back({d.name, d.cost(query_for(workers, n, k, coding, network, d)).seconds});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const AutoTrial& a, const AutoTrial& b) { return a.model_seconds < b.model_seconds; });
  // One worker: every candidate is a copy, nothing to time.
  if (workers == 1) all.resize(1);
  std::vector<AutoTrial> plausible;
  for (const AutoTrial& trial : all) {
    if (trial.model_seconds <= kTrialFactor * all.front().model_seconds) plausible.push_back(trial);
  }
  return plausible;
}

std::string_view cheapest_aggregator(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding,
                                     const NetworkEstimate& network) {
  return plausible_candidates(workers, n, k, coding, network).front().aggregator;
}

NetworkEstimate measure_network(transport::Transport& t) {
  NetworkEstimate fit;
  fit.known = true;
  fit.measured = true;
  if (t.size() < 2) return fit;
  std::array<float, 2> shared{};  // alpha, seconds per byte, from rank 0
  if (t.rank() < 2) {
    const int peer = 1 - t.rank();
    std::vector<std::byte> message(kPingSizes.back()), reply;
    std::array<double, kPingSizes.size()> fastest{};
    for (std::size_t s = 0; s < kPingSizes.size(); ++s) {
      const std::size_t bytes = kPingSizes[s];
      const std::span<const std::byte> payload(message.data(), bytes);
      fastest[s] = std::numeric_limits<double>::infinity();
      for (int repeat = 0; repeat <= kPingRepeats; ++repeat) {
        const double start = t.clock_seconds();
        if (t.rank() == 0) {
          t.send(peer, tag_block(auto_aggregator())[0], payload);
          t.recv(peer, tag_block(auto_aggregator())[0], reply, bytes);
        } else {
          t.recv(peer, tag_block(auto_aggregator())[0], reply, bytes);
          t.send(peer, tag_block(auto_aggregator())[0], payload);
        }
        if (reply.size() != bytes) {
          throw transport::TransportError("rank " + std::to_string(t.rank()) + ": the network ping-pong got " +
                                          std::to_string(reply.size()) + " bytes back where it sent " +
                                          std::to_string(bytes));
        }
        const double one_way = 0.5 * (t.clock_seconds() - start);
        if (repeat > 0) fastest[s] = std::min(fastest[s], one_way);
      }
    }
    // Least squares of one-way time against bytes.
    double mean_x = 0.0, mean_y = 0.0;
    for (std::size_t s = 0; s < kPingSizes.size(); ++s) {
      mean_x += static_cast<double>(kPingSizes[s]);
      mean_y += fastest[s];
    }
    mean_x /= static_cast<double>(kPingSizes.size());
    mean_y /= static_cast<double>(kPingSizes.size());
    double sxy = 0.0, sxx = 0.0;
    for (std::size_t s = 0; s < kPingSizes.size(); ++s) {
      const double dx = static_cast<double>(kPingSizes[s]) - mean_x;
      sxy += dx * (fastest[s] - mean_y);
      sxx += dx * dx;
    }
    const double beta = std::max(0.0, sxy / sxx);
    const double alpha = std::max(0.0, mean_y - beta * mean_x);
    shared = {static_cast<float>(alpha), static_cast<float>(beta)};
  }
  broadcast(t, shared, 0);
  if (!(std::isfinite(shared[0]) && std::isfinite(shared[1]) && shared[0] >= 0.0f && shared[1] >= 0.0f)) {
    throw transport::TransportError("rank " + std::to_string(t.rank()) + ": rank 0 sent a corrupt network fit");
  }
  fit.alpha_seconds = shared[0];
  fit.seconds_per_byte = shared[1];
  return fit;
}

RankTraffic auto_trial_traffic(int workers, int rank) { return allreduce_max_traffic(workers, rank, 2); }

const AutoDecision* auto_decision(const Aggregator& aggregator) {
  const auto* a = dynamic_cast<const AutoAggregator*>(&aggregator);
  return a != nullptr ? &a->decision() : nullptr;
}

const AggregatorDescriptor& auto_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "auto",
      .wire_id = 7,
      .summary = "per exchange, the fastest of its candidates: the closed forms on the network (given, or fitted "
                 "by a ping-pong) propose, timed trials of the plausible ones decide",
      .properties = {.sends_indices = true, .exact_sum_order = false, .delegates = true},
      .tag_count = 1,
      .make = construct<AutoAggregator>,
      .reference = no_reference,
      .cost = cheapest_cost,
      .traffic = nullptr,
      .traffic_of = nullptr,
      // While it tries, the candidates it has run keep their buffers: dense's arrays, Ok-Topk's
      // regions (shared out: arrays_shared), every candidate's pairs; after it settles, those it
      // did not choose are freed.
      .worker_memory = {.arrays = 4.7, .pairs = 40, .pairs_per_worker = 4, .arrays_shared = 2.5,
                        .posted_receives = oktopk_aggregator().worker_memory.posted_receives},
      .reference_memory = {.arrays = 3, .pairs = 50, .pairs_per_worker = 25},
      .result_memory = {.arrays = 1, .pairs = 1, .pairs_per_worker = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
