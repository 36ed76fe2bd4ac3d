// Command-line option checks and their one-line messages.
#include "cli/usage.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

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
