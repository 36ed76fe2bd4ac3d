// A dataset's score breakdown (LongBench-E's length ranges) reaches the cell's metrics, each
// range's score the mean of its samples' scores as the run stored them.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "harness/runner/runner.h"
#include "methods/method.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

TEST(ScoreBreakdown, LongBenchERangesAreCellMetrics) {
  test::TempDir dir;
  // lcc scores by similarity, so that kvbench-tiny-v2's answers score a little, each its own.
  std::ofstream file(dir.file("lcc_e.jsonl"));
  const std::vector<std::string> answers = {"int x = 1;", "return a + b;", "for (;;) {}",
                                            "print(x)"};
  const std::vector<int> lengths = {100, 5000, 6000, 9000};
  for (size_t i = 0; i < lengths.size(); ++i)
    file << json{{"input", ""}, {"context", "def f" + std::to_string(i) + "():\n    "},
                 {"answers", {answers[i]}}, {"length", lengths[i]}, {"all_classes", nullptr},
                 {"_id", "r" + std::to_string(lengths[i])}}.dump() << "\n";
  file.close();
  const auto model = LlamaModel::from_reference("kvbench-tiny-v2");
  const DatasetInfo& info = dataset_registry().get("longbench", "test");
  Cell cell{.model = "kvbench-tiny-v2",
            .dataset = {.name = "longbench",
                        .params = info.normalise_params({{"dataset", "lcc_e"},
                                                         {"data_dir", dir.path()}},
                                                        "test")},
            .method = {.name = "full", .label = "full",
                       .config = method_registry().get("full", "test").normalise_config(
                           json::object(), "test")},
            .max_new_tokens = 12};
  const CellResult result = run_cell(cell, *model, [](int, int) {});
  ASSERT_EQ(result.samples.size(), 4u);
  std::map<std::string, double> score_of;  // sample id -> its stored score
  for (const SampleRow& s : result.samples) score_of[s.sample_id] = s.score;
  // Scores that tell the samples apart, so that a breakdown reading the wrong one shows.
  ASSERT_NE(score_of["r5000"], score_of["r6000"]);
  ASSERT_GT(score_of["r5000"] + score_of["r6000"], 0);
  std::map<std::string, double> metrics;
  std::map<std::string, std::string> units;
  for (const MetricRow& m : result.metrics)
    if (!m.sample_id) {
      metrics[m.name] = m.value;
      units[m.name] = m.unit;
    }
  const std::map<std::string, std::pair<double, int>> expected = {
      {"0-4k", {score_of["r100"], 1}},
      {"4-8k", {(score_of["r5000"] + score_of["r6000"]) / 2, 2}},
      {"8k+", {score_of["r9000"], 1}}};
  for (const auto& [range, want] : expected) {
    SCOPED_TRACE(range);
    ASSERT_TRUE(metrics.count("score_" + range));
    EXPECT_NEAR(metrics["score_" + range], want.first, 0.005);  // eval.py rounds to 2 decimals
    EXPECT_EQ(metrics["records_" + range], want.second);
    EXPECT_EQ(units["score_" + range], "code_sim_score");
    EXPECT_EQ(units["records_" + range], "count");
  }
}

}  // namespace
}  // namespace kvb
