// Every aggregator against the serial reference over the in-process transport (the suite is in
// conformance.hpp; the c10d transport's tests run it too).

#include <gtest/gtest.h>

#include "collectives/conformance.hpp"
#include "sparsgd/transport/local.hpp"

namespace sparsgd {
namespace {

using testing::Case;

class AggregatorConformance : public ::testing::TestWithParam<Case> {};

TEST_P(AggregatorConformance, MatchesReferenceConservesMassAndCountsBytes) {
  testing::check_aggregator_conformance(GetParam(), [](int workers, const auto& worker) {
    transport::run_local_workers(workers, worker);
  });
}

INSTANTIATE_TEST_SUITE_P(AllWorkerCounts, AggregatorConformance, ::testing::ValuesIn(testing::all_cases()),
                         testing::case_name);

}  // namespace
}  // namespace sparsgd
