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

}  // namespace
}  // namespace kvb
