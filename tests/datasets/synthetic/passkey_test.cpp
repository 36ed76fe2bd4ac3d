// The passkey datasets' scoring, InfiniteBench's get_score_one_passkey: the answer's first
// number (first_int_match: the first run of ASCII digits) must be the pass key.
#include <gtest/gtest.h>

#include "tests/datasets/dataset_test_util.h"

namespace kvb {
namespace {

TEST(PasskeyScore, TheFirstNumberMustBeTheKey) {
  for (const char* name : {"passkey", "multi_turn"}) {
    const auto dataset = test::make_dataset(name, json::object());
    Sample s;
    s.answers = {"71432"};
    EXPECT_EQ(dataset->score(s, " 71432. Remember it."), 100.0) << name;
    EXPECT_EQ(dataset->score(s, "The pass key is 71432"), 100.0) << name;
    EXPECT_EQ(dataset->score(s, "71432"), 100.0) << name;
    // The key inside a longer number, after another number, or absent.
    EXPECT_EQ(dataset->score(s, "714321"), 0.0) << name;
    EXPECT_EQ(dataset->score(s, "7143271432"), 0.0) << name;
    EXPECT_EQ(dataset->score(s, "1. The pass key is 71432"), 0.0) << name;
    EXPECT_EQ(dataset->score(s, "12345, then 71432"), 0.0) << name;
    EXPECT_EQ(dataset->score(s, "no key"), 0.0) << name;
    EXPECT_EQ(dataset->score(s, ""), 0.0) << name;
  }
}

}  // namespace
}  // namespace kvb
