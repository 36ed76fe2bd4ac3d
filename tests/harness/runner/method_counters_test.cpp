// A cell's method.* metrics from its samples' counters: a sample the method never compressed
// (its prompt within B) reports no cache lookups and no fetched bytes, and must not count as a
// hit rate of 0; the hit rate is the cell's hits over its lookups.
#include <gtest/gtest.h>

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
  {
    std::ofstream out(dir.file("trec.jsonl"));
    for (const auto& [id, context] : std::vector<std::pair<std::string, std::string>>{
             {"short", "Once upon a time."}, {"long", long_context}})
      out << json{{"input", "What?"}, {"context", context}, {"answers", {"yes"}},
                  {"length", 3}, {"dataset", "trec"}, {"language", "en"},
                  {"all_classes", {"yes", "no"}}, {"_id", id}}
                 .dump()
          << "\n";
  }
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const json params = dataset_registry().get("longbench", "test").normalise_params(
      {{"dataset", "trec"}, {"data_dir", dir.path()}}, "test");
  for (const std::string method : {"pqcache", "clusterkv"}) {
    const Cell cell{.model = "kvbench-tiny",
                    .dataset = {.name = "longbench", .params = params},
                    .method = {.name = method, .label = method,
                               .config = method_registry().get(method, "test").normalise_config(
                                   json::object(), "test")},
                    .budget = 80,
                    .max_new_tokens = 8};
    const std::map<std::string, double> m = cell_metrics(run_cell(cell, *model, [](int, int) {}));
    ASSERT_EQ(m.count("method.cache_hit_rate"), 1u) << method;
    ASSERT_GT(m.at("method.cache_lookups"), 0) << method;
    // Only the long sample looked anything up: its hits over its lookups, not half of that.
    EXPECT_NEAR(m.at("method.cache_hit_rate"),
                m.at("method.cache_hits") / m.at("method.cache_lookups"), 1e-12) << method;
    EXPECT_GT(m.at("method.cache_hit_rate"), 0) << method;
    EXPECT_GT(m.at("method.fetched_bytes_per_step"), 0) << method;
  }
}

}  // namespace
}  // namespace kvb
