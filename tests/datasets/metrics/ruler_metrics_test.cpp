#include "datasets/metrics/ruler_metrics.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(RulerMetrics, StringMatchAllIsTheFractionFound) {
  EXPECT_NEAR(string_match_all("The numbers are 1234567 and Quick-FOX.", {"1234567", "quick-fox", "999"}),
              200.0 / 3.0, 1e-9);
  EXPECT_EQ(string_match_all("", {"1"}), 0.0);
  EXPECT_EQ(string_match_all("anything", {}), 0.0);
}

// Both sides folded as Python's str.lower() folds them, beyond ASCII (Python:
// "ÉTÉ".lower() == "été", "\u212a".lower() == "k", the Kelvin sign).
TEST(RulerMetrics, CaseFoldsAsPythonsLower) {
  EXPECT_EQ(string_match_all("Un ÉTÉ chaud", {"été"}), 100.0);
  EXPECT_EQ(string_match_all("the \u212a key", {"k key"}), 100.0);
  EXPECT_EQ(string_match_part("UN ÉTÉ", {"hiver", "un été"}), 100.0);
}

TEST(RulerMetrics, StringMatchPartIsAny) {
  EXPECT_EQ(string_match_part("it is PARIS", {"London", "paris"}), 100.0);
  EXPECT_EQ(string_match_part("it is Rome", {"London", "paris"}), 0.0);
}

}  // namespace
}  // namespace kvb
