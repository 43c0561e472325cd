// Top-k S-SGD: every worker's selection reaches every worker, which sums them. Bruck's allgather:
// ceil(log2 P) rounds for any P; in round j each rank forwards the blocks it holds to rank - 2^j,
// so each rank sends P - 1 blocks in all. The sum is taken in rank order on every rank, so it is
// bitwise identical everywhere.

#include <algorithm>

#include "collectives/algorithms.hpp"
#include "sparsgd/select/threshold.hpp"

namespace sparsgd::collectives {
namespace {

class AllgatherBruck final : public Aggregator {
 public:
  std::string name() const override { return "allgather"; }
  std::uint32_t wire_id() const override { return kAllgatherBruck; }

  void aggregate(transport::Transport& t, const SparseVector& local, std::size_t k, Aggregation& out) override {
    try {
      gather_and_sum(t, local, k, out);
    } catch (...) {
      accumulator_.clear();  // may hold partial sums; the next call starts from zeros again
      throw;
    }
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
                        local.indices, local.values, {}, blocks_[0]);
    std::size_t held = 1;
    for (int dist = 1; dist < p; dist *= 2) {
      const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(dist), blocks_total - held);
      outgoing_.clear();
      for (std::size_t i = 0; i < count; ++i) outgoing_.insert(outgoing_.end(), blocks_[i].begin(), blocks_[i].end());
      const int to = (r - dist % p + p) % p;
      const int from = (r + dist) % p;
      t.sendrecv(to, 300, outgoing_, from, 300, incoming_, count * wire::sparse_message_bytes(capacity));
      // Split the concatenation back into blocks, validating each header before trusting it.
      const wire::Expectation expect = expectation(*this, local, k, capacity, from);
      std::span<const std::byte> rest(incoming_);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t length = wire::sparse_message_length(rest, expect);
        blocks_[held + i].assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(length));
        rest = rest.subspan(length);
      }
      if (!rest.empty()) throw wire::WireError("message from rank " + std::to_string(from) + ": trailing bytes");
      held += count;
    }
    // Sum in rank order through a dense accumulator; a bitmap of touched indices gives the
    // ascending result without sorting and lets the accumulator be cleared in O(touched).
    accumulator_.resize(local.dim, 0.0f);
    touched_.assign((local.dim + 63) / 64, 0);
    for (int source = 0; source < p; ++source) {
      const auto slot = static_cast<std::size_t>((source - r + p) % p);
      wire::Expectation expect = expectation(*this, local, k, capacity, source);
      wire::decode_sparse(blocks_[slot], expect, block_, mask_, 0);
      for (std::size_t i = 0; i < block_.size(); ++i) {
        const std::uint32_t index = block_.indices[i];
        accumulator_[index] += block_.values[i];
        touched_[index / 64] |= std::uint64_t{1} << (index % 64);
      }
    }
    out.dense = false;
    out.dense_sum.clear();
    out.sum.dim = local.dim;
    out.sum.clear();
    for (std::size_t w = 0; w < touched_.size(); ++w) {
      std::uint64_t word = touched_[w];
      while (word != 0) {
        const auto index = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(word)));
        out.sum.indices.push_back(index);
        out.sum.values.push_back(accumulator_[index]);
        accumulator_[index] = 0.0f;
        word &= word - 1;
      }
    }
    out.consumed.assign(local.size(), 1);
  }

  std::vector<std::vector<std::byte>> blocks_;
  std::vector<std::byte> outgoing_, incoming_;
  std::vector<float> accumulator_;
  std::vector<std::uint64_t> touched_;
  SparseVector block_;
  std::vector<std::uint8_t> mask_;
};

}  // namespace

std::unique_ptr<Aggregator> make_allgather() { return std::make_unique<AllgatherBruck>(); }

}  // namespace sparsgd::collectives
