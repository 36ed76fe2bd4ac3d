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
  e = test::suite_error({{"name", "snapkv"}, {"config", {{"gqa", "per_group"}}}}, {32});
  EXPECT_NE(e.find("gqa"), std::string::npos) << e;
}

// L = 8 one-hot keys, one KV head shared by two query heads (d = 8, W = 2, no pooling). Window
// query 6 of query head 0 looks at key 1, of query head 1 (less sharply) at key 4, so the
// group mean ranks key 1 first; query 7 of both looks at itself.
Prompt two_headed_prompt() {
  Prompt p;
  p.k = at::eye(8).unsqueeze(0);
  p.v = at::randn({1, 8, 8});
  p.q = at::zeros({2, 8, 8});
  p.q[0][6] = unit(1, 8) * 60.0;
  p.q[1][6] = unit(4, 8) * 10.0;  // key 4 gets 0.85 of its attention
  p.q[0][7] = unit(7, 8) * 60.0;
  p.q[1][7] = unit(7, 8) * 60.0;
  return p;
}

// B = 4: one scored key + the window of 2, the 4th slot for the decode token.
std::unique_ptr<Method> prefill_two_headed(const std::string& gqa, LayerKV& kv) {
  Prompt p = two_headed_prompt();
  auto method = test::make_method("snapkv", {{"window", 2}, {"kernel", 1}, {"gqa", gqa}});
  method->begin(test::context(1, 2, 1, 8, 4, 8));
  kv.append_many(p.k, p.v, 0);
  method->on_prefill(0, p.q, p.k, p.v, kv);
  return method;
}

TEST(SnapKV, PerKVHeadKeepsTheGroupsMeanTopKey) {
  LayerKV kv(1, 8, at::kFloat);
  auto method = prefill_two_headed("per_kv_head", kv);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{1, 6, 7}));  // key 1's mean beats key 4's
  EXPECT_TRUE(method->select(0, at::zeros({2, 8}), kv).all);
  // (1 scored + 2 window) x K and V x d 8 x 4 bytes, one copy per KV head.
  EXPECT_DOUBLE_EQ(method->counters().at("layout_kv_bytes"), 3 * 2 * 8 * 4);
}

TEST(SnapKV, PerQueryHeadKeepsEachQueryHeadsOwnTopKeyAndAttendsOnlyToIt) {
  LayerKV kv(1, 8, at::kFloat);
  auto method = prefill_two_headed("per_query_head", kv);
  // The KV head holds the union: key 1 (query head 0), key 4 (query head 1), the window.
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{1, 4, 6, 7}));
  kv.append(at::zeros({1, 8}), at::zeros({1, 8}), 8);  // a decode token: every query head's
  const Selection s = method->select(0, at::zeros({2, 8}), kv);
  EXPECT_FALSE(s.all);
  EXPECT_TRUE(s.per_query_head);
  EXPECT_EQ(s.lists(), (std::vector<std::vector<int64_t>>{{0, 2, 3, 4}, {1, 2, 3, 4}}));
  kv.append(at::zeros({1, 8}), at::zeros({1, 8}), 9);  // two more: built on the device
  kv.append(at::zeros({1, 8}), at::zeros({1, 8}), 10);
  const Selection later = method->select(0, at::zeros({2, 8}), kv);
  EXPECT_EQ(later.lists(),
            (std::vector<std::vector<int64_t>>{{0, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}}));
  EXPECT_EQ(later.max_count, 6);
  // The references' repeated layout holds each query head's 3 entries: twice per KV head's.
  EXPECT_DOUBLE_EQ(method->counters().at("layout_kv_bytes"), 2 * 3 * 2 * 8 * 4);
}

std::vector<int> prompt(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 41 + 11) % 250);
  return ids;
}

TEST(SnapKV, PerQueryHeadSelectionRunsInTheEngine) {
  // random-tiny: 2 query heads per KV head. A budget covering the prompt is Full.
  test::expect_matches_full("snapkv", 128, prompt(100), {{"gqa", "per_query_head"}});
  // B = 48: each query head attends 48 at the first step (the KV head's mean, as counted); its
  // KV head holds the union of the two query heads' selections, more than 47 entries.
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("snapkv", {{"gqa", "per_query_head"}});
  SessionOptions options;
  options.budget = 48;
  Session s(*model, *method, options);
  s.decode(argmax_token(s.prefill(prompt(300))));
  const int heads = model->config.num_key_value_heads;
  int64_t resident = 0;
  for (int l = 0; l < model->config.num_hidden_layers; ++l)
    for (int h = 0; h < heads; ++h) {
      EXPECT_EQ(s.attended().sum[l * heads + h], 48.0) << "layer " << l << " head " << h;
      resident += s.kv()[l].size(h);
    }
  EXPECT_GT(resident, 48 * model->config.num_hidden_layers * heads);
}

}  // namespace
}  // namespace kvb
