#pragma once
// Aggregators (layer 5): collectives that sum the workers' sparse selections, written only against
// the Transport interface. The result is the SUM over workers (the optimizer divides by P), and
// every aggregator reports exactly which local entries are inside it, so that error feedback keeps
// the rest (docs/DESIGN.md, "exact residual accounting").

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparsgd/core/sparse_vector.hpp"
#include "sparsgd/core/wire.hpp"
#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

struct Aggregation {
  // The algorithm that formed this sum: the aggregator's own name, or the one auto chose.
  std::string_view method;
  bool dense = false;
  SparseVector sum;                    // sparse methods: the global sum, ascending, equal on every rank
  std::vector<float> dense_sum;        // the dense method: n floats, equal on every rank
  std::vector<std::uint8_t> consumed;  // one flag per local entry: 1 if its value is inside the sum
};

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  virtual std::string name() const = 0;
  // Identifies the algorithm on the wire, so that ranks running different ones fail clearly.
  virtual std::uint32_t wire_id() const = 0;
  // `local`: this worker's selection (ascending indices, local.dim = n, equal n on all ranks);
  // k: the per-worker target (equal on all ranks). Collective: every rank must call it.
  virtual void aggregate(transport::Transport& transport, const SparseVector& local, std::size_t k,
                         Aggregation& out) = 0;
};

// A network under the alpha-beta model: what auto costs the candidates on.
struct NetworkEstimate {
  double alpha_seconds = 0.0;     // per message
  double seconds_per_byte = 0.0;  // 1 / bandwidth
  bool known = false;             // false: auto measures it at its first exchange
  bool measured = false;          // it came from the ping-pong
};

// How an aggregator builds its messages; every rank of a job must pass the same.
// The most trial rounds auto accepts: each round runs every plausible candidate once.
inline constexpr int kMaxAutoTrialRounds = 16;

struct AggregatorOptions {
  AggregatorOptions() = default;
  AggregatorOptions(wire::IndexCoding coding, NetworkEstimate given = {}, int trial_rounds = 2)
      : index_coding(coding), network(given), auto_trial_rounds(trial_rounds) {}
  // Compressed indices (core/index_codec.hpp) cost CPU time on both ends and save about 20 of a
  // raw index's 32 bits at density 0.001: worth it where the network is slow.
  wire::IndexCoding index_coding = wire::IndexCoding::raw;
  // auto only: the network to choose for.
  NetworkEstimate network;
  // auto only: how often each plausible candidate is timed before auto settles (auto_select.hpp);
  // 0: the closed forms' choice, untimed.
  int auto_trial_rounds = 2;
};

// dense, allgather, gtopk, gtopk-rd, oktopk, randk-shared, auto. Throws InvalidArgument for other names, and for
// compressed indices with an aggregator that sends no indices (dense, randk-shared).
std::unique_ptr<Aggregator> make_aggregator(const std::string& name, const AggregatorOptions& options = {});
const std::vector<std::string>& aggregator_names();

}  // namespace sparsgd::collectives
