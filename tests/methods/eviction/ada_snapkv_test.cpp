#include "methods/eviction/ada_snapkv.h"

#include <gtest/gtest.h>

#include "engine/session.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// One row per KV head: `positives` distinct scores above zero, zeros elsewhere.
at::Tensor scores_with_counts(const std::vector<int>& positives, int n) {
  at::Tensor s = at::zeros({int64_t(positives.size()), n}, at::kFloat);
  float value = 100.0f;
  for (size_t h = 0; h < positives.size(); ++h)
    for (int j = 0; j < positives[h]; ++j) s[h][(j * 3) % n] = value--;
  return s;
}

TEST(AdaSnapKV, HeadCapacitiesFollowTheFlattenedTopK) {
  // B = 13, W = 8: B' = 5, floor = int(5 * 0.2) = 1, top 3 x 5 = 15 of the flattened scores.
  // Head 0 holds 10 of them, head 1 five, head 2 none:
  // caps = round(10*0.8 + 1) = 9, round(5*0.8 + 1) = 5, round(0 + 1) = 1.
  EXPECT_EQ(ada_head_capacities(scores_with_counts({10, 5, 0}, 10), 13, 8, 0.2),
            (std::vector<int64_t>{9, 5, 1}));
  // Counts 7, 6, 2: 6.6 -> 7, 5.8 -> 6, 2.6 -> 3 (the reference's rounding: total 16, not 15).
  EXPECT_EQ(ada_head_capacities(scores_with_counts({7, 6, 2}, 10), 13, 8, 0.2),
            (std::vector<int64_t>{7, 6, 3}));
  // alpha = 1: every head gets B' whatever the scores; alpha = 0: exactly the counts.
  EXPECT_EQ(ada_head_capacities(scores_with_counts({10, 5, 0}, 10), 13, 8, 1.0),
            (std::vector<int64_t>{5, 5, 5}));
  EXPECT_EQ(ada_head_capacities(scores_with_counts({10, 5, 0}, 10), 13, 8, 0.0),
            (std::vector<int64_t>{10, 5, 0}));
  // Ties at the threshold (the zeros) go to the earliest flattened positions on every device:
  // head 0 takes its 8 zeros after its 2 positives, head 1 the 5 slots left, head 2 none.
  EXPECT_EQ(ada_head_capacities(scores_with_counts({2, 0, 0}, 10), 13, 8, 0.0),
            (std::vector<int64_t>{10, 5, 0}));
}

TEST(AdaSnapKV, NormalizeWeighsHeadsByTheirTopMassShare) {
  // B' = 2, two heads, H x B' = 4 flattened slots, alpha = 0 (caps = counts).
  // Head 0 is concentrated (0.4, then four 0.15), head 1 flat (five 0.2).
  at::Tensor s = at::tensor({0.4f, 0.15f, 0.15f, 0.15f, 0.15f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f})
                     .view({2, 5});
  // Raw scores (FFY0/AdaKV): the top 4 are 0.4 and three 0.2 -> caps 1, 3.
  EXPECT_EQ(ada_head_capacities(s, 10, 8, 0.0), (std::vector<int64_t>{1, 3}));
  // normalize (KVCache-Factory): head 0 x (0.4 + 0.15) = 0.55 -> 0.22, four 0.0825; head 1 x
  // 0.4 -> five 0.08: the top 4 all lie in head 0 -> caps 4, 0.
  EXPECT_EQ(ada_head_capacities(s, 10, 8, 0.0, true), (std::vector<int64_t>{4, 0}));
  // With the floor alpha = 0.5: int(2 x 0.5) = 1; round(4 x 0.5 + 1) = 3, round(0 + 1) = 1.
  EXPECT_EQ(ada_head_capacities(s, 10, 8, 0.5, true), (std::vector<int64_t>{3, 1}));
}

TEST(AdaSnapKV, ConfigValidation) {
  const MethodInfo& info = method_registry().get("ada_snapkv", "test");
  const json defaults = info.normalise_config(json::object(), "s");
  // FFY0/AdaKV as its LongBench pred.py runs it (with --gqa_support's per-KV-head selection).
  EXPECT_EQ(defaults, (json{{"window", 32}, {"kernel", 7}, {"pooling", "max"},
                            {"group_reduce", "mean"}, {"gqa", "per_kv_head"}, {"alpha", 0.2},
                            {"normalize", false}}));
  auto message = [&](const json& config, int64_t budget) -> std::string {
    try {
      info.check_budget(info.normalise_config(config, "s"), budget, "s");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({{"alpha", 1.5}}, 64).find("s.alpha"), std::string::npos);
  EXPECT_NE(message({{"alpha", -0.1}}, 64).find("s.alpha"), std::string::npos);
  EXPECT_NE(message({{"kernel", 6}}, 64).find("s.kernel"), std::string::npos);
  EXPECT_NE(message({{"floor", 1}}, 64).find("floor"), std::string::npos);
  EXPECT_NE(message({{"window", 32}}, 32).find("s.window"), std::string::npos);
  EXPECT_NE(message(json::object(), 32).find("ada_snapkv:kvcache-factory"), std::string::npos)
      << "the default window 32 refuses B = 32 and names the preset that does not";
  EXPECT_NE(message({{"normalize", 1}}, 64).find("s.normalize"), std::string::npos);
  EXPECT_NE(message({{"gqa", "per_group"}}, 64).find("s.gqa"), std::string::npos);
  EXPECT_EQ(message({{"window", 32}, {"alpha", 0.5}}, 64), "");
}

std::vector<int> prompt(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 53 + 7) % 250);
  return ids;
}

TEST(AdaSnapKV, BudgetAbovePromptMatchesFull) {
  test::expect_matches_full("ada_snapkv", 128, prompt(100));
}

TEST(AdaSnapKV, FirstDecodeStepAttendsBOnAverageWithRaggedHeads) {
  // B = 28, W = 8: B' = 20, floor 4; with 2 KV heads c_0 + c_1 = 40 and the fractional parts of
  // 0.8 c_h sum to an integer without ties, so each layer's total is exactly 2 x 20.
  auto model = LlamaModel::from_reference("random-tiny");
  auto ada = method_registry().get("ada_snapkv", "t").create({{"window", 8}});
  SessionOptions options;
  options.budget = 28;
  Session s(*model, *ada, options);
  s.decode(argmax_token(s.prefill(prompt(100))));
  const int heads = model->config.num_key_value_heads, layers = model->config.num_hidden_layers;
  double total = 0;
  for (int l = 0; l < layers; ++l) {
    double layer_total = 0;
    for (int h = 0; h < heads; ++h) {
      const double attended = s.attended().sum[l * heads + h];
      EXPECT_GE(attended, 8 + 4) << "floor + window, layer " << l;
      EXPECT_EQ(int64_t(attended), s.kv()[l].size(h)) << "the cache holds what is attended";
      layer_total += attended;
    }
    EXPECT_EQ(layer_total, 2 * 28.0) << "layer " << l;
    total += layer_total;
  }
  EXPECT_DOUBLE_EQ(total / (layers * heads), 28.0);
}

}  // namespace
}  // namespace kvb
