#include <gtest/gtest.h>

#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// B = 4 with heavy = recent = 2, one KV head with a group of 2 query heads, L = 6.
// Zero queries make prefill attention uniform over the causal prefix, so key j receives
// sum_{i >= j} 1/(i+1) from each query head: keys 0 and 1 are the heavy hitters.
class H2ODecode : public ::testing::Test {
 protected:
  void SetUp() override {
    method = test::make_method("h2o");
    method->begin(test::context(1, 2, 1, 4, 4, 6));
    at::Tensor q = at::zeros({2, 6, 4}), k = at::randn({1, 6, 4}), v = at::randn({1, 6, 4});
    kv().append_many(k, v, 0);
    method->on_prefill(0, q, k, v, kv());
  }

  LayerKV& kv() { return layers[0]; }

  // A decode step: the step begins (the previous step's eviction is applied), a token is
  // appended at `position`, then attention probabilities (both query heads alike) over the
  // resident entries are reported.
  void step(int64_t position, std::vector<float> probs_row) {
    method->on_decode_step(layers);
    kv().append(at::randn({1, 4}), at::randn({1, 4}), position);
    method->on_append(0, at::Tensor(), at::Tensor(), kv());
    ASSERT_EQ(int64_t(probs_row.size()), kv().size(0));
    at::Tensor row = at::tensor(probs_row);
    method->on_attention(0, Selection::everything(), {at::stack({row, row})}, kv());
  }

  // The positions resident when the next step begins, before its token is appended.
  std::vector<int64_t> at_next_step() {
    method->on_decode_step(layers);
    return kv().positions(0);
  }

  std::unique_ptr<Method> method;
  std::vector<LayerKV> layers = std::vector<LayerKV>(1, LayerKV(1, 4, at::kFloat));
};

TEST_F(H2ODecode, PrefillKeepsHeavyHittersAndTheRecentToken) {
  // B - 1 = 3 entries: 2 heavy (keys 0, 1) + the last prompt token (the decode token
  // completes the recent window of 2).
  EXPECT_EQ(kv().positions(0), (std::vector<int64_t>{0, 1, 5}));
}

TEST_F(H2ODecode, EvictsTheLowestAccumulatedScoreOutsideTheRecentWindow) {
  // Scores before: key0 4.90, key1 2.90, key5 0.33, new key6 0. Step adds 2x[0, 0, .5, .5]:
  // key5 1.33, key6 1.00. Key 6 is in the recent window, so key 5 (lowest outside) goes.
  step(6, {0.f, 0.f, 0.5f, 0.5f});
  EXPECT_EQ(kv().positions(0), (std::vector<int64_t>{0, 1, 5, 6}));  // not before the next step
  EXPECT_EQ(at_next_step(), (std::vector<int64_t>{0, 1, 6}));
  // key0 += 2: 6.90; key6 stays 1.00, outside the window now, and is the lowest.
  step(7, {1.f, 0.f, 0.f, 0.f});
  EXPECT_EQ(at_next_step(), (std::vector<int64_t>{0, 1, 7}));
  // key7 and the new key8 get 2 x 0.5 each: key7 (1.00) is below key1 (2.90) and goes.
  step(8, {0.f, 0.f, 0.5f, 0.5f});
  EXPECT_EQ(at_next_step(), (std::vector<int64_t>{0, 1, 8}));
  // key8 gets 2 x 1.0 more: 3.00 > 2.90, so now key 1 is the lowest and leaves.
  step(9, {0.f, 0.f, 1.f, 0.f});
  EXPECT_EQ(at_next_step(), (std::vector<int64_t>{0, 8, 9}));
}

TEST(H2O, TiesGoToTheOldestEntry) {
  // B = 4 (recent 2), a one-token prompt: its key gets probability 1 from each of the 2 query
  // heads. Scores in exact binary fractions; the third step leaves keys 1 and 2 tied.
  auto method = test::make_method("h2o");
  method->begin(test::context(1, 2, 1, 4, 4, 1));
  std::vector<LayerKV> layers(1, LayerKV(1, 4, at::kFloat));
  LayerKV& kv = layers[0];
  at::Tensor q = at::zeros({2, 1, 4}), k = at::randn({1, 1, 4}), v = at::randn({1, 1, 4});
  kv.append_many(k, v, 0);
  method->on_prefill(0, q, k, v, kv);  // key0: 2
  const std::vector<std::vector<float>> rows = {
      {0.5f, 0.5f},        // key0 3, key1 1
      {0.5f, 0.5f, 0.f},   // key0 4, key1 2, key2 0
      {0.f, 0.f, 1.f, 0.f}  // key0 4, key1 2, key2 2, key3 0: 4 > B - 1, key3 recent
  };
  for (size_t t = 0; t < rows.size(); ++t) {
    method->on_decode_step(layers);
    kv.append(at::randn({1, 4}), at::randn({1, 4}), int64_t(t) + 1);
    method->on_append(0, at::Tensor(), at::Tensor(), kv);
    at::Tensor row = at::tensor(rows[t]);
    method->on_attention(0, Selection::everything(), {at::stack({row, row})}, kv);
  }
  method->on_decode_step(layers);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{0, 2, 3}));
}

// Two layers of two KV heads (one query head each), B = 4, a one-token prompt: each (layer,
// head) is given its own attention, so the four pick different victims, and all four are
// evicted when the next step begins, each from its own layer and head.
TEST(H2O, EveryLayerAndHeadEvictsItsOwnVictim) {
  auto method = test::make_method("h2o");
  method->begin(test::context(2, 2, 2, 4, 4, 1));
  std::vector<LayerKV> layers;
  for (int l = 0; l < 2; ++l) {
    layers.emplace_back(2, 4, at::kFloat);
    at::Tensor q = at::zeros({2, 1, 4}), k = at::randn({2, 1, 4}), v = at::randn({2, 1, 4});
    layers[size_t(l)].append_many(k, v, 0);
    method->on_prefill(l, q, k, v, layers[size_t(l)]);  // key0: 1 in every head
  }
  // Steps 1-3 fill each head to 4 entries. Per (layer, head), rows[t] is step t's attention;
  // at step 3 the scores of entries 0..2 (the candidates) decide: 0 goes in layer 0 head 0,
  // 1 in layer 0 head 1, 2 in layer 1 head 0, 1 in layer 1 head 1.
  const std::vector<std::vector<std::vector<float>>> rows = {
      {{0.f, 1.f}, {0.f, 0.f, 1.f}, {0.f, 0.f, 0.f, 1.f}},          // 1 1 1 . -> ties: 0
      {{1.f, 0.f}, {0.5f, 0.f, 0.5f}, {0.f, 0.f, 0.f, 1.f}},        // 2.5 0 .5 -> 1
      {{0.f, 1.f}, {0.f, 0.5f, 0.5f}, {0.5f, 0.f, 0.f, 0.5f}},      // 1.5 1.5 .5 -> 2
      {{0.5f, 0.5f}, {0.f, 0.f, 1.f}, {0.f, 0.f, 0.5f, 0.5f}}};     // 1.5 .5 1.5 -> 1
  for (size_t t = 0; t < 3; ++t) {
    method->on_decode_step(layers);
    for (int l = 0; l < 2; ++l) {
      LayerKV& kv = layers[size_t(l)];
      kv.append(at::randn({2, 4}), at::randn({2, 4}), int64_t(t) + 1);
      method->on_append(l, at::Tensor(), at::Tensor(), kv);
      std::vector<at::Tensor> probs;
      for (int h = 0; h < 2; ++h) probs.push_back(at::tensor(rows[size_t(l * 2 + h)][t]).view({1, -1}));
      method->on_attention(l, Selection::everything(), probs, kv);
    }
  }
  method->on_decode_step(layers);
  EXPECT_EQ(layers[0].positions(0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(layers[0].positions(1), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(layers[1].positions(0), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(layers[1].positions(1), (std::vector<int64_t>{0, 2, 3}));
}

TEST(H2OPrefill, KeepsTheWindowPlusTopScoresOverAllQueries) {
  auto method = test::make_method("h2o", {{"mode", "prefill"}, {"window", 2}});
  method->begin(test::context(1, 2, 1, 4, 5, 6));  // 2 scored + 2 window + decode slot
  LayerKV kv(1, 4, at::kFloat);
  at::Tensor q = at::zeros({2, 6, 4}), k = at::randn({1, 6, 4}), v = at::randn({1, 6, 4});
  kv.append_many(k, v, 0);
  method->on_prefill(0, q, k, v, kv);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{0, 1, 4, 5}));
}

TEST(H2O, BadConfigsFailAtValidation) {
  std::string e = test::suite_error({{"name", "h2o"}, {"config", {{"mode", "both"}}}}, {32});
  EXPECT_NE(e.find("h2o"), std::string::npos) << e;
  EXPECT_NE(e.find("mode"), std::string::npos) << e;
  e = test::suite_error({{"name", "h2o"}, {"config", {{"mode", "prefill"}, {"window", 40}}}}, {32});
  EXPECT_NE(e.find("window"), std::string::npos) << e;
  e = test::suite_error({{"name", "h2o"}, {"config", {{"heavy_ratio", 1.5}}}}, {32});
  EXPECT_NE(e.find("heavy_ratio"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvb
