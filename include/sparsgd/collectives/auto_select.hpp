#pragma once
// `auto`: for each exchange, the cheapest of dense, allgather, gtopk-rd and oktopk on the network in
// use; a dense allreduce among them is SparCML's switch to dense where the sparse sum would cost
// more. The network is given (AggregatorOptions::network) or measured at the first exchange by a
// ping-pong between ranks 0 and 1 whose alpha and beta every rank then receives from rank 0.
//
// The closed forms count latencies and bytes only; an aggregation also spends CPU time (merges,
// selections, index coding, Ok-Topk's histograms), which on a fast network or at a small k can
// decide the order. So the model proposes and the clock decides: for each new (workers, n, k), the
// candidates whose closed form is within kTrialFactor of the cheapest are each run kAutoWarmupRounds
// times untimed (warm-ups) and then at least AggregatorOptions::auto_trial_rounds times in turn
// (every exchange is a real one, its result exact), timed on the transport's clock (the slowest
// rank's time, which every rank learns by a max-reduction, so all settle alike), and the one with
// the fastest trial is used for that (workers, n, k) until its next trials. One plausible candidate,
// or 0 rounds: the closed form's choice, for good.
//
// Two timed exchanges can both be far off. At P = 256 threads on 2 cores, n = 1M, density 0.01,
// 10gbe, exchanges of one run alternated between about 4 and 17-33 ms; gtopk-rd's two timed ones
// were both slow (7.6 ms by the trials' clock, about 7x its steady time) and auto settled on
// Ok-Topk, 4.6x slower from then on (docs/results/findings.md). So the clock must also say when it
// cannot tell: while a candidate's fastest time is under the fastest candidate's second-fastest
// (contested_candidates: the leader's floor is not confirmed below it), those candidates run again,
// timed, as long as the trials stay within what every candidate's warm-ups and timed rounds would
// take (4 x 4 = 16 exchanges by default: where fewer candidates are plausible, the rounds the others
// would have used).
//
// Two timed exchanges a candidate are also too few where most candidates are implausible: at P =
// 256 threads, n = 25M, density 0.001, 10gbe (round 4 of the sweep of commit 13f7771) gtopk-rd's two timed
// exchanges both took about 20 ms where its steady time is 2.4 ms (its own run had 4 of exchanges
// 2-10 at 9.6-10.3 ms), Ok-Topk's took 5.5 and 5.8, neither second-fastest was under the other's
// fastest, and auto settled on Ok-Topk, 2.4x slower from then on. So the budget of every candidate's
// rounds buys more timed rounds when fewer are plausible (timed_trial_rounds): two candidates run
// five timed rounds each, and one contested round still fits.
//
// A candidate's cost moves as training goes on: error feedback's residuals change what the workers
// select over the first ~1/density exchanges. At P = 32, n = 25M, density 0.01 on 10gbe, Ok-Topk's
// fastest exchange of ten rose from 10.6 ms (exchanges 0-9) to 16.4-16.8 (each ten of exchanges
// 60-99) while gtopk-rd's went from 12.9 to 12.8-14.4, bytes unchanged (docs/results/findings.md):
// trials at start-up chose Ok-Topk, which 100 exchanges later was the slower. So a settled choice
// is tried again after kAutoRetrialFirst of its exchanges, then after twice as many each time, up
// to every kAutoRetrialMost: a re-trial costs a few exchanges (warm-ups included), a share that
// halves each time.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

// The aggregators auto chooses from (their descriptors' auto_rank), in the order ties go.
const std::vector<std::string_view>& auto_candidates();

// The cheapest candidate for (workers, n, k, coding) on `network` by the closed forms.
std::string_view cheapest_aggregator(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding,
                                     const NetworkEstimate& network);

// Collective. Ranks 0 and 1 time round trips of 0 B to 1 MiB on the transport's clock (wall time;
// a simulated network's or SMPI's clock where there is one), the fastest of several each; rank 0
// fits one-way time = alpha + bytes * seconds_per_byte by least squares (neither below 0), and every
// rank receives that fit. One rank: a network that costs nothing.
NetworkEstimate measure_network(transport::Transport& t);

// A candidate is tried when its closed form is at most this many times the cheapest's: the trials
// then cost at most this factor (by the model) per exchange spent on them, once per (n, k).
inline constexpr double kTrialFactor = 3.0;
// Trials closer than this (relative) are a tie, which the cheaper closed form wins, unless the
// clock told them apart: the fastest candidate beat it in two timed exchanges (its second-fastest is
// at or under the other's fastest), which is also when the contested rounds stop running them. A
// candidate's trial time against its own run's same exchanges varied 0.66-2.13x, median 1.02, over
// the first round of the 3d41750 sweep (docs/results/findings.md). At 3% (up to commit b8db23a) auto at
// P = 256 threads, n = 25M, density 0.01, 10gbe settled on gtopk-rd, timed 5.8% faster than Ok-Topk,
// which ran 2.0x faster from then on. In the 42 auto runs of that sweep so far, the trials overturned
// the model by 1.39x or more, except once by 3.5% where the two fixed runs were within 10% of each
// other both rounds (P = 32, n = 25M, density 0.01, 10gbe): 10% keeps every clear overturn. Why two
// wins overrule the tie (commit 2185729): at P = 4, n = 25M, density 0.01, paper-1gbe, once Ok-Topk got
// faster, its trials took 45.4 and 47.9 ms against gtopk-rd's 42.0 and 43.3, apart but within 10%;
// the tie kept Ok-Topk, which then ran 1.22x slower than gtopk-rd. Replayed over the recorded trials
// of 181 auto runs since commit 6a8424d, the two wins change only that choice (findings.md). A cheaper
// closed form truly slower by less than the tolerance, while the trials overlap, is kept; that is
// the price, and the re-trials (kAutoRetrialFirst) time it again.
inline constexpr double kTrialTieTolerance = 0.10;

// Exchanges one set of trials may take, warm-ups included: what every candidate's warm-ups and
// `trial_rounds` timed rounds would.
std::uint64_t auto_trial_budget(int trial_rounds);

// The timed rounds each of `candidates` plausible candidates runs before any contested round: at
// least `trial_rounds`, and as many more as the budget (auto_trial_budget) holds while leaving room
// for one contested round of them all. 0 rounds: 0; fewer than 2 candidates (nothing to time
// against): `trial_rounds`.
int timed_trial_rounds(std::size_t candidates, int trial_rounds);

// Untimed rounds before the timed ones. A first exchange allocates and first touches its buffers
// (2-4x its steady time at n = 25M), and one is not enough: at P = 256 threads, n = 25M, density
// 0.01, Ok-Topk's exchanges took 111.5, 34.4, 29.8, then 21-24 ms (commit c8041e4), its process taking
// 160,000, 74,000 and 71,000 new pages in exchanges 2-4 and none from the 5th on (the allocator's
// arenas growing to the working set of buffers that circulate between ranks). Timed on exchanges 2
// and 3 it lost to a slower candidate; on 3 and 4 the faster of the two (the trials keep the
// fastest) is its steady time.
inline constexpr int kAutoWarmupRounds = 2;

// Settled exchanges of one (workers, n, k) before its trials run again, the interval doubling after
// each re-trial up to kAutoRetrialMost. Only the candidates whose last trial was within
// kRetrialFactor of the fastest run again (one that was over twice as slow will not have overtaken
// it; re-trying it would cost the most); when that leaves the settled one alone, nothing runs.
inline constexpr std::uint64_t kAutoRetrialFirst = 128;
inline constexpr std::uint64_t kAutoRetrialMost = 8192;
inline constexpr double kRetrialFactor = 2.0;

struct AutoTrial {
  std::string_view aggregator;
  double model_seconds = 0.0;
  double measured_seconds = -1.0;  // the fastest of its trials (the slowest rank's time); -1: not run yet
  int runs = 0;
  double second_seconds = -1.0;  // the second-fastest of its trials; -1: fewer than 2 runs
};
// Adds one timed trial of `seconds` to `trial`.
void record_timed_run(AutoTrial& trial, double seconds);

// The trials (indices, in order) that have not told the fastest candidate apart: the fastest (the
// first of equals) and every timed candidate whose fastest run is under the fastest's second-fastest
// (with one run, its only one). Empty when none is, or none was timed.
std::vector<std::size_t> contested_candidates(const std::vector<AutoTrial>& trials);

// Whether `fastest`'s two fastest timed runs are both at or under `other`'s fastest.
bool beaten_twice(const AutoTrial& fastest, const AutoTrial& other);

// The candidate settled on after trials: the first (cheapest closed form first) that is the fastest
// candidate or within kTrialTieTolerance of its fastest timed run without being beaten twice by it;
// candidates not timed are passed over, and with none timed it is the first.
std::string_view settled_choice(const std::vector<AutoTrial>& trials);

// The candidates worth timing for (workers, n, k) on `network`, cheapest closed form first.
std::vector<AutoTrial> plausible_candidates(int workers, std::size_t n, std::size_t k, wire::IndexCoding coding,
                                            const NetworkEstimate& network);

// What a trial exchange sends on top of its candidate's own messages (the max-reduction of its span).
RankTraffic auto_trial_traffic(int workers, int rank);

// What an auto aggregator decided, for reports: the network it used, the choice of its last call,
// and for the last (n, k) it met its latest trials and what it settled on (empty while trying).
struct AutoDecision {
  NetworkEstimate network;
  std::string_view last_choice;
  std::string_view settled;
  std::string_view model_choice;  // the closed forms' cheapest for that (n, k)
  std::vector<AutoTrial> trials;
  int timed_rounds = 0;  // the timed rounds those trials gave each candidate (timed_trial_rounds)
  std::uint64_t trial_exchanges = 0;  // exchanges spent on trials, warm-ups included, over every (n, k)
  std::uint64_t timed_exchanges = 0;  // those of them timed (each adds auto_trial_traffic)
  std::uint64_t retrials = 0;         // trials run again for a settled (n, k), over every (n, k)
  // The last (n, k): how many of this aggregator's exchanges came before its first settled one (its
  // first trials, and every exchange of any (n, k) met before); meaningful once it has settled.
  std::uint64_t first_settled_after = 0;
};
// Null unless `aggregator` is auto's.
const AutoDecision* auto_decision(const Aggregator& aggregator);

}  // namespace sparsgd::collectives
