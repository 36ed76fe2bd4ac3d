// The nearest valid name offered for a typo (commands, options, methods, JSON keys).
#include "engine/common/nearest_name.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(ClosestName, OffersTheNearestNameOnlyWhenItIsClearlyMeant) {
  const std::vector<std::string> commands = {"run", "list", "show", "generate", "report", "reproduce"};
  EXPECT_EQ(closest_name("runn", commands), "run");
  EXPECT_EQ(closest_name("lst", commands), "list");
  EXPECT_EQ(closest_name("gen", commands), "generate");  // a prefix; "run" is 2 edits away
  EXPECT_EQ(closest_name("rep", commands), "");          // report or reproduce?
  EXPECT_EQ(closest_name("frobnicate", commands), "");
  EXPECT_EQ(closest_name("--fersh", {"--fresh", "--db", "--set"}), "--fresh");
  EXPECT_EQ(closest_name("methdos", {"methods", "datasets"}), "methods");
  EXPECT_EQ(did_you_mean("snapkvv", {"snapkv", "h2o"}), " (did you mean snapkv?)");
  EXPECT_EQ(did_you_mean("zzz", {"snapkv", "h2o"}), "");
}

}  // namespace
}  // namespace kvb
