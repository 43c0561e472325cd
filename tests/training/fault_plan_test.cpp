// The --inject-fault syntax: every kind parses, anything else is refused with the expected syntax.
#include "sparsgd/training/fault_plan.hpp"

#include <gtest/gtest.h>

#include "sparsgd/core/error.hpp"

namespace sparsgd {
namespace {

TEST(FaultPlan, ParsesEveryKind) {
  EXPECT_FALSE(parse_fault_plan("").has_value());
  const auto nan = parse_fault_plan("nan:1:5");
  ASSERT_TRUE(nan.has_value());
  EXPECT_EQ(nan->kind, FaultPlan::Kind::nan);
  EXPECT_TRUE(nan->at(1, 5));
  EXPECT_FALSE(nan->at(1, 6));
  EXPECT_FALSE(nan->at(0, 5));
  EXPECT_EQ(parse_fault_plan("inf:0:0")->kind, FaultPlan::Kind::inf);
  EXPECT_EQ(parse_fault_plan("throw:3:7")->kind, FaultPlan::Kind::thrown);
  EXPECT_EQ(parse_fault_plan("hang:2:1")->kind, FaultPlan::Kind::hang);
  EXPECT_EQ(parse_fault_plan("crash-checkpoint:0:10")->kind, FaultPlan::Kind::crash_checkpoint);
  const auto onward = parse_fault_plan("nan:0:4+");
  EXPECT_FALSE(onward->at(0, 3));
  EXPECT_TRUE(onward->at(0, 4));
  EXPECT_TRUE(onward->at(0, 400));
}

TEST(FaultPlan, RefusesMalformedSpecs) {
  for (const char* bad : {"nan", "nan:1", "nan:1:2:3", "bogus:0:1", "nan:-1:2", "nan:x:2", "nan:1:", "nan:1:-2",
                          "nan::2", "nan:1:2++", "nan:1:+", ":1:2", "nan:99999999999999999999:1"}) {
    try {
      parse_fault_plan(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("KIND:RANK:ITERATION"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sparsgd
