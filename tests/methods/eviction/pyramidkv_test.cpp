#include "methods/eviction/pyramidkv.h"

#include <gtest/gtest.h>

#include "engine/session.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

TEST(PyramidKV, CapacitiesOf32LayersFrom234To17) {
  // base = 120, min = 120 / 20 = 6, max = 240 - 6 = 234, steps = 228 / 31 = 7.
  const std::vector<int64_t> caps = pyramid_capacities(128, 8, 100000, 32, 20);
  ASSERT_EQ(caps.size(), 32u);
  EXPECT_EQ(caps[0] + 8, 242);
  EXPECT_EQ(caps[0], 234);
  EXPECT_EQ(caps[1], 227);
  EXPECT_EQ(caps[31], 17);
  for (int l = 1; l < 32; ++l) EXPECT_EQ(caps[l - 1] - caps[l], 7) << "layer " << l;
}

TEST(PyramidKV, ShortPromptFallsBackToUniformSnapKV) {
  // L = 239 < 2 * base = 240: every layer keeps base = 120.
  EXPECT_EQ(pyramid_capacities(128, 8, 239, 32, 20), std::vector<int64_t>(32, 120));
  // A single layer (the reference would divide by zero): uniform too.
  EXPECT_EQ(pyramid_capacities(128, 8, 5000, 1, 20), std::vector<int64_t>(1, 120));
}

TEST(PyramidKV, MaxClampedToPromptMinusWindow) {
  // L = 240: max = 234 >= L - W = 232, so max = 232, min = 240 - 232 = 8, steps = 224/31 = 7.
  const std::vector<int64_t> caps = pyramid_capacities(128, 8, 240, 32, 20);
  EXPECT_EQ(caps[0], 232);
  EXPECT_EQ(caps[1], 225);
  EXPECT_EQ(caps[31], 232 - 31 * 7);
  // 4 layers, B=30, W=8, L=50: base 22, min 1, max 43 >= 42 -> max 42, min 2, steps 13.
  EXPECT_EQ(pyramid_capacities(30, 8, 50, 4, 20), (std::vector<int64_t>{42, 29, 16, 3}));
}

TEST(PyramidKV, ConfigValidation) {
  const MethodInfo& info = method_registry().get("pyramidkv", "test");
  EXPECT_EQ(info.normalise_config(json::object(), "s")["beta"], 20);
  EXPECT_EQ(info.normalise_config(json::object(), "s")["window"], 8);
  auto message = [&](const json& config, int64_t budget) -> std::string {
    try {
      info.check_budget(info.normalise_config(config, "s"), budget, "s");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({{"beta", 0}}, 64).find("s.beta"), std::string::npos);
  EXPECT_NE(message({{"kernel", 4}}, 64).find("s.kernel"), std::string::npos);
  EXPECT_NE(message({{"bogus", 1}}, 64).find("bogus"), std::string::npos);
  EXPECT_NE(message({{"window", 64}}, 64).find("s.window"), std::string::npos);
  EXPECT_EQ(message({{"window", 32}, {"beta", 10}}, 64), "");
}

// Prompt of length n, deterministic.
std::vector<int> prompt(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 37 + 11) % 250);
  return ids;
}

TEST(PyramidKV, BudgetAbovePromptMatchesFull) {
  test::expect_matches_full("pyramidkv", 128, prompt(100));
}

TEST(PyramidKV, FirstDecodeStepAttendsBOnAverage) {
  // 4 layers, B=30, W=8, L=100: base 22, min 1, max 43, steps 14 -> 43, 29, 15, 1 (sum 4 x 22).
  auto model = LlamaModel::from_reference("random-tiny");
  auto pyramid = method_registry().get("pyramidkv", "t").create(json::object());
  SessionOptions options;
  options.budget = 30;
  Session s(*model, *pyramid, options);
  s.decode(argmax_token(s.prefill(prompt(100))));
  const AttendedCounts& attended = s.attended();
  const int heads = model->config.num_key_value_heads;
  const std::vector<int64_t> expected{43 + 8, 29 + 8, 15 + 8, 1 + 8};
  double total = 0;
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < heads; ++h) {
      EXPECT_EQ(attended.sum[l * heads + h], double(expected[l])) << l << "," << h;
      total += attended.sum[l * heads + h] / attended.steps;
    }
  EXPECT_DOUBLE_EQ(total / (4 * heads), 30.0);
}

}  // namespace
}  // namespace kvb
