#include <gtest/gtest.h>

#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

using test::unit;

// L = 8 one-hot keys (d = 8). The window (W = 2) queries: position 6 looks only at key 2,
// position 7 only at itself. Window scores of keys 0..5 are then [0, 0, 1, 0, 0, 0]; max
// pooling with kernel 3 spreads key 2's score to keys 1 and 3.
struct Prompt {
  at::Tensor q, k, v;  // q: [2, 8, 8] (Hq = 2), k, v: [1, 8, 8] (Hkv = 1)
};

Prompt one_hot_prompt() {
  Prompt p;
  p.k = at::eye(8).unsqueeze(0);
  p.v = at::randn({1, 8, 8});
  p.q = at::zeros({2, 8, 8});
  for (int h = 0; h < 2; ++h) {
    p.q[h][6] = unit(2, 8) * 60.0;
    p.q[h][7] = unit(7, 8) * 60.0;
  }
  return p;
}

TEST(SnapKV, KeepsPooledTopKeysPlusTheWindow) {
  Prompt p = one_hot_prompt();
  auto method = test::make_method("snapkv", {{"window", 2}, {"kernel", 3}});
  // B = 6: 3 scored keys + 2 window keys after prefill, the 6th slot for the decode token.
  method->begin(test::context(1, 2, 1, 8, 6, 8));
  LayerKV kv(1, 8, at::kFloat);
  kv.append_many(p.k, p.v, 0);
  method->on_prefill(0, p.q, p.k, p.v, kv);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{1, 2, 3, 6, 7}));
}

TEST(SnapKV, WithoutPoolingOnlyTheAttendedKeyStandsOut) {
  Prompt p = one_hot_prompt();
  auto method = test::make_method("snapkv", {{"window", 2}, {"kernel", 1}});
  method->begin(test::context(1, 2, 1, 8, 4, 8));  // 1 scored key + 2 window
  LayerKV kv(1, 8, at::kFloat);
  kv.append_many(p.k, p.v, 0);
  method->on_prefill(0, p.q, p.k, p.v, kv);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{2, 6, 7}));
}

TEST(SnapKV, BadConfigsFailAtValidationNamingMethodAndField) {
  std::string e = test::suite_error({{"name", "snapkv"}, {"config", {{"window", 64}}}}, {32});
  EXPECT_NE(e.find("snapkv"), std::string::npos) << e;
  EXPECT_NE(e.find("window"), std::string::npos) << e;
  e = test::suite_error({{"name", "snapkv"}, {"config", {{"kernel", 4}}}}, {32});
  EXPECT_NE(e.find("kernel"), std::string::npos) << e;
  e = test::suite_error({{"name", "snapkv"}, {"config", {{"windw", 4}}}}, {32});
  EXPECT_NE(e.find("windw"), std::string::npos) << e;
  e = test::suite_error({{"name", "snapkv"}, {"config", {{"pooling", "min"}}}}, {32});
  EXPECT_NE(e.find("pooling"), std::string::npos) << e;
  e = test::suite_error("snapkv", {0});
  EXPECT_NE(e.find("budget"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvb
