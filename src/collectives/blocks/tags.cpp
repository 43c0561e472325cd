#include "collectives/blocks/tags.hpp"

#include <stdexcept>
#include <string>

namespace sparsgd::collectives {
namespace {

// The first tag handed out; those below are left to a user's own point-to-point messages.
constexpr int kFirstTag = 100;
// MPI guarantees tags up to 32767 (MPI_TAG_UB may be larger, never smaller).
constexpr int kTagLimit = 32767;

int user_size(TagUser user) {
  switch (user) {
    case TagUser::small_collectives: return tag_offsets::kSmallCollectives;
    case TagUser::rank_agreement: return tag_offsets::kRankAgreement;
    case TagUser::benchmark_harness: return tag_offsets::kBenchmarkHarness;
  }
  throw std::logic_error("unknown tag user");
}

constexpr TagUser kUsers[] = {TagUser::small_collectives, TagUser::rank_agreement, TagUser::benchmark_harness};

int after_users() {
  int next = kFirstTag;
  for (const TagUser user : kUsers) next += user_size(user);
  return next;
}

}  // namespace

int TagBlock::operator[](int offset) const {
  if (offset < 0 || offset >= size) {
    throw std::logic_error("tag offset " + std::to_string(offset) + " outside a block of " + std::to_string(size));
  }
  return base + offset;
}

TagBlock tag_block(TagUser user) {
  int next = kFirstTag;
  for (const TagUser u : kUsers) {
    if (u == user) return {next, user_size(u)};
    next += user_size(u);
  }
  throw std::logic_error("unknown tag user");
}

TagBlock tag_block(const AggregatorDescriptor& aggregator) {
  int next = after_users();
  for (const AggregatorDescriptor* d : aggregator_descriptors()) {
    if (d == &aggregator) {
      if (next + d->tag_count > kTagLimit) throw std::logic_error("the aggregators' tags exceed MPI's 32767");
      return {next, d->tag_count};
    }
    next += d->tag_count;
  }
  throw std::logic_error("the aggregator '" + std::string(aggregator.name) + "' is not in the registry");
}

}  // namespace sparsgd::collectives
