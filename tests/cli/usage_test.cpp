// The nearest valid name offered for a command-line typo.
#include "cli/usage.h"

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
}

TEST(Validators, SayWhatIsWrongInOneShortLine) {
  std::string text = "-1";
  EXPECT_EQ(non_negative("all cores")(text), "-1 is negative; expected 0 or more (0: all cores)");
  text = "0";
  EXPECT_EQ(non_negative()(text), "");
  EXPECT_EQ(positive()(text), "0 is not positive; expected a number > 0");
  text = "1e400x";
  EXPECT_EQ(positive()(text), "\"1e400x\" is not a number");
  text = "suites";
  EXPECT_EQ(one_of({"methods", "suites"})(text), "");
  text = "suite";
  EXPECT_EQ(one_of({"methods", "suites"})(text), "\"suite\" is not one of methods, suites (did you mean suites?)");
}

}  // namespace
}  // namespace kvb
