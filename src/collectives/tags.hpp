#pragma once
// Message tags of every collective, in one place: a message of one collective must never match a
// receive of another (the receiver would misread it, or wait for a message already taken), so
// each owns its own tags and a new collective takes a free block here. Collectives of one rank
// run one after another on a transport, so one block each suffices.

namespace sparsgd::collectives::tags {

// The ring allreduce (dense, randk-shared): base and base + 1 (reduce-scatter, allgather).
inline constexpr int kDenseRing = 100;
inline constexpr int kRandkSharedRing = 200;
inline constexpr int kAllgatherBruck = 300;
inline constexpr int kGtopkTreeReduce = 400;
inline constexpr int kGtopkTreeBroadcast = 401;
inline constexpr int kGtopkRdFold = 500;
inline constexpr int kGtopkRdUnfold = 501;
// Round r of recursive doubling uses kGtopkRdRound + r, r < kMaxRounds (2^64 ranks would need 64).
inline constexpr int kGtopkRdRound = 510;
inline constexpr int kMaxRounds = 64;
// Bookkeeping (bookkeeping.cpp) and the start-up agreement of options (agreement.cpp).
inline constexpr int kBroadcast = 700;
inline constexpr int kGather = 701;
inline constexpr int kScatter = 702;
inline constexpr int kReduce = 703;
inline constexpr int kMaxReduce = 704;
inline constexpr int kAgreementGather = 710;
inline constexpr int kAgreementVerdict = 711;
inline constexpr int kAgreementText = 712;
// auto's network measurement (auto_select.cpp).
inline constexpr int kPingPong = 720;
// Ok-Topk: the split to the region owners; its allreduces of counts (fold, unfold, then a round
// each); the allgather of the selected entries (fold, unfold, then a round each).
inline constexpr int kOktopkSplit = 800;
inline constexpr int kOktopkCounts = 810;
inline constexpr int kOktopkGather = 900;

static_assert(kDenseRing + 1 < kRandkSharedRing && kRandkSharedRing + 1 < kAllgatherBruck);
static_assert(kGtopkRdRound + kMaxRounds <= kBroadcast, "recursive doubling's rounds overlap the next block");
static_assert(kAgreementText < kOktopkSplit && kOktopkSplit < kOktopkCounts);
static_assert(kOktopkCounts + 2 + kMaxRounds <= kOktopkGather, "Ok-Topk's count rounds overlap its gather");

}  // namespace sparsgd::collectives::tags
