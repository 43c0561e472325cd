#pragma once
// Message tags, from one allocator. A message of one collective must never match a receive of
// another (the receiver would misread it, or wait for a message already taken), so every user
// owns a block of tags, handed out here one after another: first the small collectives', the
// start-up agreement's and the benchmark harness's, then each aggregator's in registry order, as
// many as its descriptor asks for (AggregatorDescriptor::tag_count). Collectives of one rank run
// one after another on a transport, so one block each suffices. All ranks run the same build, so
// they agree on every block.

#include "sparsgd/collectives/descriptor.hpp"

namespace sparsgd::collectives {

// Tags [base, base + size).
struct TagBlock {
  int base = 0;
  int size = 0;
  // The tag at `offset` in the block; throws std::logic_error past its end.
  int operator[](int offset) const;
};

enum class TagUser { small_collectives, rank_agreement, benchmark_harness };

// The offsets inside the blocks of the users that are not aggregators.
namespace tag_offsets {
inline constexpr int kBroadcast = 0, kGather = 1, kScatter = 2, kReduce = 3, kMaxReduce = 4, kSmallCollectives = 5;
inline constexpr int kAgreementGather = 0, kAgreementVerdict = 1, kAgreementText = 2, kRankAgreement = 3;
inline constexpr int kHarnessClock = 0, kHarnessSummary = 2, kHarnessRecords = 4, kBenchmarkHarness = 6;
}  // namespace tag_offsets

// Recursive doubling over P ranks takes at most this many rounds (2^64 ranks would need 64): an
// aggregator with a tag a round asks for this many.
inline constexpr int kMaxRounds = 64;

TagBlock tag_block(TagUser user);
TagBlock tag_block(const AggregatorDescriptor& aggregator);

}  // namespace sparsgd::collectives
