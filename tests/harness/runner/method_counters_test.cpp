// A cell's method.* metrics from its samples' counters: a sample the method never compressed
// (its prompt within B) reports no cache lookups and no fetched bytes, and must not count as a
// hit rate of 0; the hit rate is the cell's hits over its lookups.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "datasets/dataset.h"
#include "harness/runner/runner.h"
#include "methods/method.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

std::map<std::string, double> cell_metrics(const CellResult& r) {
  std::map<std::string, double> out;
  for (const MetricRow& m : r.metrics)
    if (!m.sample_id) out[m.name] = m.value;
  return out;
}

TEST(MethodCounters, AnUncompressedSampleLeavesTheHitRateAlone) {
  test::TempDir dir;
  std::string long_context;
  for (int i = 0; i < 300; ++i) long_context += "the cat sat on the mat and looked at the door. ";
  // Two folders: the short and the long record, and the long one alone.
  const std::string both = dir.file("both"), alone = dir.file("alone");
  const auto write = [](const std::string& folder,
                        const std::vector<std::pair<std::string, std::string>>& records) {
    std::filesystem::create_directories(folder);
    std::ofstream out(folder + "/trec.jsonl");
    for (const auto& [id, context] : records)
      out << json{{"input", "What?"}, {"context", context}, {"answers", {"yes"}},
                  {"length", 3}, {"dataset", "trec"}, {"language", "en"},
                  {"all_classes", {"yes", "no"}}, {"_id", id}}
                 .dump()
          << "\n";
  };
  write(both, {{"short", "Once upon a time."}, {"long", long_context}});
  write(alone, {{"long", long_context}});
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const auto metrics_of = [&](const std::string& method, const std::string& folder) {
    const json params = dataset_registry().get("longbench", "test").normalise_params(
        {{"dataset", "trec"}, {"data_dir", folder}}, "test");
    const Cell cell{.model = "kvbench-tiny",
                    .dataset = {.name = "longbench", .params = params},
                    .method = {.name = method, .label = method,
                               .config = method_registry().get(method, "test").normalise_config(
                                   json::object(), "test")},
                    .budget = 80,
                    .max_new_tokens = 8};
    return cell_metrics(run_cell(cell, *model, [](int, int) {}));
  };
  for (const std::string method : {"pqcache", "clusterkv"}) {
    const std::map<std::string, double> m = metrics_of(method, both), l = metrics_of(method, alone);
    ASSERT_EQ(m.count("method.cache_hit_rate"), 1u) << method;
    ASSERT_GT(m.at("method.cache_lookups"), 0) << method;
    EXPECT_GT(m.at("method.cache_hit_rate"), 0) << method;
    // Only the long sample compressed: the cell's values are that sample's, not half of them.
    for (const char* name : {"method.cache_hit_rate", "method.cache_hits", "method.cache_lookups",
                             "method.fetched_bytes_per_step"})
      EXPECT_NEAR(m.at(name), l.at(name), 1e-9 * l.at(name)) << method << " " << name;
  }
}

// Two samples: 100 bytes in 1 step and 900 bytes in 9 steps. The cell fetched 1000 bytes in 10
// steps, 100 a step (the mean of the samples' rates, 100 and 100, agrees here); 100 bytes in 1
// step and 100 in 9: 200 over 10, 20 a step, where the mean of 100 and 11.1 would be 55.6.
TEST(MethodCounters, RatesArePooledOverTheCell) {
  using Sums = std::map<std::string, std::pair<double, int>>;
  const Sums sums = {{"fetched_bytes", {200, 2}},
                     {"fetch_steps", {10, 2}},
                     {"fetched_bytes_per_step", {100 + 100.0 / 9, 2}},
                     {"cache_hits", {3, 2}},
                     {"cache_lookups", {4, 2}},
                     {"cache_hit_rate", {1 + 0.5 / 3, 2}},
                     {"index_bytes", {30, 2}}};
  EXPECT_DOUBLE_EQ(pooled_counter(sums, "fetched_bytes_per_step"), 20);
  EXPECT_DOUBLE_EQ(pooled_counter(sums, "cache_hit_rate"), 0.75);
  EXPECT_DOUBLE_EQ(pooled_counter(sums, "index_bytes"), 15);
  EXPECT_DOUBLE_EQ(pooled_counter(sums, "fetched_bytes"), 100);
}

// The cell reports its fetched bytes and steps beside the rate, and the rate is their ratio
// (the pooling itself: RatesArePooledOverTheCell; PQCache in budget mode fetches the same bytes
// every step, so a mean of the samples' rates would agree here).
TEST(MethodCounters, FetchedBytesPerStepIsTheCellsBytesOverItsSteps) {
  test::TempDir dir;
  std::string a, b;
  for (int i = 0; i < 300; ++i) a += "the cat sat on the mat and looked at the door. ";
  for (int i = 0; i < 200; ++i) b += "a dog ran to the red barn, then slept. ";
  {
    std::ofstream out(dir.file("trec.jsonl"));
    for (const auto& [id, context] : {std::pair<std::string, std::string>{"a", a}, {"b", b}})
      out << json{{"input", "What?"}, {"context", context}, {"answers", {"yes"}},
                  {"length", 3}, {"dataset", "trec"}, {"language", "en"},
                  {"all_classes", {"yes", "no"}}, {"_id", id}}
                 .dump()
          << "\n";
  }
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const json params = dataset_registry().get("longbench", "test").normalise_params(
      {{"dataset", "trec"}, {"data_dir", dir.path()}}, "test");
  const Cell cell{.model = "kvbench-tiny",
                  .dataset = {.name = "longbench", .params = params},
                  .method = {.name = "pqcache", .label = "pqcache",
                             .config = method_registry().get("pqcache", "test").normalise_config(
                                 json::object(), "test")},
                  .budget = 80,
                  .max_new_tokens = 8};
  const std::map<std::string, double> m = cell_metrics(run_cell(cell, *model, [](int, int) {}));
  // Both are means over the same two samples: their ratio is the sums' ratio.
  EXPECT_NEAR(m.at("method.fetched_bytes_per_step"),
              m.at("method.fetched_bytes") / m.at("method.fetch_steps"),
              1e-9 * m.at("method.fetched_bytes_per_step"));
}

}  // namespace
}  // namespace kvb
