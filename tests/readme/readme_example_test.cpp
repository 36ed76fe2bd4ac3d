// The README's "Adding a method" example (compiled from README.md into this binary by
// CMakeLists.txt): it registers, documents its config, refuses bad configs, equals Full when the
// budget covers the prompt and keeps exactly the most recent entries otherwise.
#include <gtest/gtest.h>

#include "engine/session.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

std::vector<int> prompt(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 37) % 250);
  return ids;
}

TEST(ReadmeExample, RegistersWithItsDocumentedConfig) {
  const MethodInfo& info = method_registry().get("recent_window", "test");
  EXPECT_EQ(info.family, "eviction");
  ASSERT_EQ(info.config_fields.size(), 1u);
  EXPECT_EQ(info.config_fields[0].name, "window");
  EXPECT_EQ(info.config_fields[0].default_value, "8");
  EXPECT_EQ(info.normalise_config(json::object(), "recent_window"), (json{{"window", 8}}));
  EXPECT_NE(test::suite_error({{"name", "recent_window"}, {"config", {{"window", 0}}}}, {32})
                .find("window: must be >= 1"),
            std::string::npos);
  EXPECT_NE(test::suite_error({{"name", "recent_window"}, {"config", {{"windw", 4}}}}, {32})
                .find("unknown key \"windw\""),
            std::string::npos);
  EXPECT_NE(test::suite_error(json("recent_window"), {8}).find("window: must be smaller"),
            std::string::npos);
}

TEST(ReadmeExample, EqualsFullWhenTheBudgetCoversThePrompt) {
  test::expect_matches_full("recent_window", 112, prompt(96));
}

TEST(ReadmeExample, KeepsTheMostRecentBudgetMinusOneEntries) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("recent_window");
  Session session(*model, *method, SessionOptions{.budget = 32});
  session.prefill(prompt(100));
  // Prefill keeps B - 1 = 31 entries per KV head: positions 69..99, the newest.
  for (const LayerKV& kv : session.kv())
    for (int h = 0; h < kv.num_heads(); ++h)
      EXPECT_EQ(kv.positions(h), test::range(69, 100)) << "head " << h;
}

}  // namespace
}  // namespace kvb
