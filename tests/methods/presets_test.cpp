// Presets ("<method>:<preset>"): each one's normalised config holds the documented values of the
// reference it names, and it is usable wherever a method name is: suite files, --set method=,
// generate --method (resolve_method), with the entry's own config on top.
#include <gtest/gtest.h>

#include "harness/suite/suite.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

json preset(const std::string& name) {
  return resolve_method(name, json::object(), "test", "test.config").config;
}

// ClusterKV's accuracy code repeats the centroids to every query head and selects per query
// head (cluster_attention.py); kvbench's default sums the group's queries per KV head.
TEST(Presets, ClusterKVAccuracyCodeSelectsPerQueryHead) {
  EXPECT_EQ(preset("clusterkv:sjtu-zhao-lab").at("gqa"), "per_query_head");
  EXPECT_FALSE(preset("clusterkv").contains("gqa"));  // the default, kept out of older configs
}

TEST(Presets, SnapKVReferences) {
  EXPECT_EQ(preset("snapkv:kvcache-factory"),
            (json{{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"group_reduce", "mean"},
                  {"gqa", "per_query_head"}}));
  EXPECT_EQ(preset("snapkv:kvpress"),
            (json{{"window", 64}, {"kernel", 5}, {"pooling", "avg"}, {"group_reduce", "mean"},
                  {"gqa", "per_kv_head"}}));
  EXPECT_EQ(preset("snapkv:fasterdecoding"),
            (json{{"window", 32}, {"kernel", 7}, {"pooling", "max"}, {"group_reduce", "mean"},
                  {"gqa", "per_query_head"}}));
}

TEST(Presets, PyramidKVReferences) {
  EXPECT_EQ(preset("pyramidkv:kvcache-factory"),
            (json{{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"group_reduce", "mean"},
                  {"gqa", "per_query_head"}, {"beta", 20}}));
}

TEST(Presets, AdaSnapKVReferences) {
  const json ffy0 = {{"window", 32}, {"kernel", 7}, {"pooling", "max"}, {"group_reduce", "mean"},
                     {"gqa", "per_query_head"}, {"alpha", 0.2}, {"normalize", false}};
  EXPECT_EQ(preset("ada_snapkv:ffy0"), ffy0);
  json gqa = ffy0;
  gqa["gqa"] = "per_kv_head";
  EXPECT_EQ(preset("ada_snapkv:ffy0-gqa"), gqa);
  EXPECT_EQ(preset("ada_snapkv"), gqa) << "the default follows the authors' code (FFY0/AdaKV)";
  EXPECT_EQ(preset("ada_snapkv:kvcache-factory"),
            (json{{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"group_reduce", "mean"},
                  {"gqa", "per_query_head"}, {"alpha", 0.2}, {"normalize", true}}));
}

TEST(Presets, H2OKVCompressAndStreamingLLMReferences) {
  EXPECT_EQ(preset("h2o:fminference"),
            (json{{"mode", "decode"}, {"heavy_ratio", 0.5}, {"window", 8}}));
  EXPECT_EQ(preset("h2o:kvcache-factory"),
            (json{{"mode", "prefill"}, {"heavy_ratio", 0.5}, {"window", 8}}));
  const json kvc = {{"variant", "w"},       {"window", 8},     {"kernel", 7},
                    {"aggregation", "l2"},  {"skip_queries", 10}, {"protected", 8},
                    {"pool_scope", "all"},  {"continual", false},   {"compression_rate", 0.0}, {"min_cache_tokens", 128}};
  EXPECT_EQ(preset("kv_compress:paper"), kvc);
  json fork = kvc;
  fork["window"] = 32;
  fork["protected"] = 50;
  EXPECT_EQ(preset("kv_compress:vllm-kvcompress"), fork);
  EXPECT_EQ(preset("streaming_llm:mit-han-lab"), (json{{"sinks", 4}, {"decode_eviction", true}}));
  EXPECT_EQ(preset("streaming_llm:kvcache-factory"),
            (json{{"sinks", 4}, {"decode_eviction", false}}));
}

TEST(Presets, EveryPresetNormalisesAndNamesItsReference) {
  for (const MethodInfo* m : method_registry().all()) {
    std::set<std::string> names;
    for (const MethodPreset& p : m->presets) {
      const std::string full = m->name + ":" + p.name;
      EXPECT_TRUE(names.insert(p.name).second) << full << " declared twice";
      EXPECT_EQ(p.name.find(':'), std::string::npos) << full;
      const json config = preset(full);
      EXPECT_EQ(m->normalise_config(config, full), config) << full;
      for (const auto& [key, value] : p.config.items())
        EXPECT_EQ(config.at(key), value) << full << " sets " << key;
      // "owner/repo path/file" or a paper: the description says what it follows.
      EXPECT_NE(p.description.find('/'), std::string::npos) << full;
    }
  }
}

TEST(Presets, UsableInSuitesAndOverridesWithTheEntrysConfigOnTop) {
  const json suite = {{"name", "t"},
                      {"models", {"random-tiny"}},
                      {"datasets", {"passkey"}},
                      {"methods",
                       {"snapkv:kvpress",
                        {{"name", "ada_snapkv:kvcache-factory"}, {"config", {{"alpha", 0.5}}}}}},
                      {"budgets", {128}}};
  Suite s = parse_suite(suite, "t.json");
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[0].name, "snapkv");
  EXPECT_EQ(s.methods[0].label, "snapkv:kvpress");
  EXPECT_EQ(s.methods[0].config, preset("snapkv:kvpress"));
  EXPECT_EQ(s.methods[1].name, "ada_snapkv");
  EXPECT_EQ(s.methods[1].config["window"], 8);
  EXPECT_EQ(s.methods[1].config["alpha"], 0.5);
  EXPECT_EQ(s.cells()[0].method.label, "snapkv:kvpress");

  s = parse_suite(suite, "t.json", {"method=pyramidkv:kvcache-factory,snapkv"});
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[0].config, preset("pyramidkv:kvcache-factory"));
  EXPECT_EQ(s.methods[1].label, "snapkv");
}

TEST(Presets, UnknownPresetsAreInputErrorsListingTheKnownOnes) {
  const std::string e = test::suite_error("snapkv:nosuch", {64});
  EXPECT_NE(e.find("$.methods[0].name"), std::string::npos) << e;
  EXPECT_NE(e.find("snapkv:kvpress"), std::string::npos) << e;
  EXPECT_NE(test::suite_error("full:paper", {64}).find("it has none"), std::string::npos);
  EXPECT_NE(test::suite_error("nosuch:paper", {64}).find("unknown method"), std::string::npos);
  // A preset's values are checked against the budget like any config: kvpress's window 64.
  EXPECT_NE(test::suite_error("snapkv:kvpress", {64}).find("window"), std::string::npos);
}

std::vector<int> prompt(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 43 + 1) % 250);
  return ids;
}

// Every preset runs: Full when the budget covers the prompt; B attended (within the method's
// tolerance) at the first decode step otherwise, per query head included.
TEST(Presets, EveryPresetRunsAndAttendsTheBudget) {
  auto model = LlamaModel::from_reference("random-tiny");
  for (const MethodInfo* m : method_registry().all())
    for (const MethodPreset& p : m->presets) {
      const std::string full = m->name + ":" + p.name;
      const json config = preset(full);
      test::expect_matches_full(m->name, 112, prompt(96), config, 3);
      if (m->attended) continue;  // methods with their own budget rule: all_methods_test
      SessionOptions options;
      options.budget = 128;
      auto method = m->create(config);
      Session s(*model, *method, options);
      s.decode(argmax_token(s.prefill(prompt(300))));
      double total = 0;
      for (double sum : s.attended().sum) total += sum;
      EXPECT_NEAR(total / double(s.attended().sum.size()), 128.0, m->budget_tolerance) << full;
    }
}

}  // namespace
}  // namespace kvb
