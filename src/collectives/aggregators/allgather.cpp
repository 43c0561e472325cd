// Top-k S-SGD: every worker's selection reaches every worker, which sums them. Bruck's allgather:
// ceil(log2 P) rounds for any P; in round j each rank forwards the blocks it holds to rank - 2^j,
// so each rank sends P - 1 blocks in all. The sum is taken in rank order on every rank, so it is
// bitwise identical everywhere.

#include <algorithm>

#include "collectives/blocks/aggregator_support.hpp"
#include "collectives/blocks/closed_form.hpp"
#include "collectives/verification/reference_sets.hpp"
#include "sparsgd/select/threshold.hpp"
#include "collectives/blocks/tags.hpp"

namespace sparsgd::collectives {

const AggregatorDescriptor& allgather_aggregator();

namespace {

class AllgatherBruck final : public DescribedAggregator<allgather_aggregator> {
 public:
  explicit AllgatherBruck(const AggregatorOptions& options)
      : coding_(options.index_coding), tag_(tag_block(allgather_aggregator())[0]) {}

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    gather_and_sum(t, local, k, out);
  }

 private:
  void gather_and_sum(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) {
    const std::size_t capacity = select::threshold_max_count(k);
    check_local_selection(local, k, capacity, "allgather");
    const int p = t.size();
    const int r = t.rank();
    const auto blocks_total = static_cast<std::size_t>(p);
    blocks_.resize(blocks_total);
    // blocks_[i] holds the selection of rank (r + i) mod P, as its wire message.
    wire::encode_sparse(wire_id(), static_cast<std::uint32_t>(local.dim), static_cast<std::uint32_t>(k),
                        local.indices, local.values, {}, blocks_[0], coding_);
    std::size_t held = 1;
    for (int dist = 1; dist < p; dist *= 2) {
      const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(dist), blocks_total - held);
      outgoing_.clear();
      for (std::size_t i = 0; i < count; ++i) outgoing_.insert(outgoing_.end(), blocks_[i].begin(), blocks_[i].end());
      const int to = (r - dist % p + p) % p;
      const int from = (r + dist) % p;
      t.sendrecv(to, tag_, outgoing_, from, tag_, incoming_, count * wire::max_sparse_message_bytes(capacity, 0, coding_));
      // Split the concatenation back into blocks, validating each header before trusting it.
      const wire::Expectation expect = expectation(*this, local, k, capacity, from, coding_);
      std::span<const std::byte> rest(incoming_);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t length = wire::sparse_message_length(rest, expect);
        blocks_[held + i].assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(length));
        rest = rest.subspan(length);
      }
      if (!rest.empty()) throw wire::WireError("message from rank " + std::to_string(from) + ": trailing bytes");
      held += count;
    }
    // Decode every block (validating it), then sum in rank order. The sum walks the index space in
    // windows small enough that their accumulator stays in cache: within a window each rank's
    // entries are added in rank order, and a bitmap of touched indices yields the result in
    // ascending order without sorting. Scattering all P*k entries over an n-float array instead
    // would miss the cache on nearly every one.
    decoded_.resize(static_cast<std::size_t>(p));
    for (int source = 0; source < p; ++source) {
      const auto slot = static_cast<std::size_t>((source - r + p) % p);
      wire::decode_sparse(blocks_[slot], expectation(*this, local, k, capacity, source, coding_),
                          decoded_[static_cast<std::size_t>(source)], mask_, 0);
    }
    out.dense = false;
    out.dense_sum.clear();
    out.sum.dim = local.dim;
    out.sum.clear();
    constexpr std::size_t kWindow = std::size_t{1} << 18;  // 1 MiB of floats
    accumulator_.assign(std::min(kWindow, local.dim), 0.0f);
    touched_.assign((accumulator_.size() + 63) / 64, 0);
    cursor_.assign(static_cast<std::size_t>(p), 0);
    for (std::size_t base = 0; base < local.dim; base += kWindow) {
      const std::size_t end = std::min(local.dim, base + kWindow);
      bool any = false;
      for (std::size_t source = 0; source < decoded_.size(); ++source) {
        const SparseVector& block = decoded_[source];
        std::size_t& i = cursor_[source];
        for (; i < block.size() && block.indices[i] < end; ++i) {
          const std::size_t offset = block.indices[i] - base;
          accumulator_[offset] += block.values[i];
          touched_[offset / 64] |= std::uint64_t{1} << (offset % 64);
          any = true;
        }
      }
      if (!any) continue;
      for (std::size_t w = 0; w < touched_.size(); ++w) {
        std::uint64_t word = touched_[w];
        touched_[w] = 0;
        while (word != 0) {
          const std::size_t offset = w * 64 + static_cast<std::size_t>(__builtin_ctzll(word));
          out.sum.indices.push_back(static_cast<std::uint32_t>(base + offset));
          out.sum.values.push_back(accumulator_[offset]);
          accumulator_[offset] = 0.0f;
          word &= word - 1;
        }
      }
    }
    out.consumed.assign(local.size(), 1);
  }

  wire::IndexCoding coding_;
  int tag_;
  std::vector<std::vector<std::byte>> blocks_;
  std::vector<std::byte> outgoing_, incoming_;
  std::vector<SparseVector> decoded_;
  std::vector<std::size_t> cursor_;
  std::vector<float> accumulator_;
  std::vector<std::uint64_t> touched_;
  std::vector<std::uint8_t> mask_;
};

CommCost cost(const CostQuery& q) {
  CommCost cost;
  if (q.workers == 1) return cost;
  cost.messages = closed_form::ceil_log2(q.workers);
  cost.bytes_per_worker = (q.workers - 1) * q.sparse_message_bytes();
  cost.seconds = cost.messages * q.alpha_seconds + cost.bytes_per_worker * q.seconds_per_byte;
  return cost;
}

// Every rank forwards P - 1 blocks of k pairs in ceil(log2 P) rounds.
RankTraffic traffic(int workers, int, std::size_t, std::size_t k) {
  return {static_cast<std::uint64_t>(workers - 1) * wire::sparse_message_bytes(k),
          static_cast<std::uint64_t>(closed_form::ceil_log2(workers))};
}

}  // namespace

const AggregatorDescriptor& allgather_aggregator() {
  static const AggregatorDescriptor descriptor{
      .name = "allgather",
      .wire_id = 2,
      .summary = "every selection to every worker (Bruck), summed in rank order (Top-k S-SGD)",
      .properties = {.forwards_sets = true, .auto_rank = 3},
      .tag_count = 1,
      .make = construct<AllgatherBruck>,
      .reference = [](const std::vector<SparseVector>& selections, std::size_t) {
        return reference_sets::sum_in_rank_order(selections);
      },
      .cost = cost,
      .traffic = traffic,
      // gradient, residual and top-k scratch; P received blocks and their decoded pairs.
      .worker_memory = {.arrays = 2.2, .pairs = 8, .pairs_per_worker = 4},
      .reference_memory = {.pairs_per_worker = 17},
      .result_memory = {.pairs_per_worker = 1},
  };
  return descriptor;
}

}  // namespace sparsgd::collectives
