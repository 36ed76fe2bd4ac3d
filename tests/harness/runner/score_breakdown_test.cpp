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
  std::ofstream file(dir.file("passage_retrieval_en_e.jsonl"));
  for (const int length : {100, 5000, 6000, 9000})
    file << json{{"input", "Paragraph 1 is about Tartu."},
                 {"context", "Paragraph 1: Tartu.\n\nParagraph 2: Lyon."},
                 {"answers", {"Paragraph 1"}}, {"length", length}, {"all_classes", nullptr},
                 {"_id", "r" + std::to_string(length)}}.dump() << "\n";
  file.close();
  const auto model = LlamaModel::from_reference("random-tiny");
  const DatasetInfo& info = dataset_registry().get("longbench", "test");
  Cell cell{.model = "random-tiny",
            .dataset = {.name = "longbench",
                        .params = info.normalise_params({{"dataset", "passage_retrieval_en_e"},
                                                         {"data_dir", dir.path()}},
                                                        "test")},
            .method = {.name = "full", .label = "full",
                       .config = method_registry().get("full", "test").normalise_config(
                           json::object(), "test")},
            .max_new_tokens = 3};
  const CellResult result = run_cell(cell, *model, [](int, int) {});
  ASSERT_EQ(result.samples.size(), 4u);
  std::map<std::string, double> expected_sum;
  std::map<std::string, int> records;
  for (const SampleRow& s : result.samples) {
    const std::string range = s.sample_id == "r100" ? "0-4k" : s.sample_id == "r9000" ? "8k+" : "4-8k";
    expected_sum[range] += s.score;
    ++records[range];
  }
  std::map<std::string, double> metrics;
  std::map<std::string, std::string> units;
  for (const MetricRow& m : result.metrics)
    if (!m.sample_id) {
      metrics[m.name] = m.value;
      units[m.name] = m.unit;
    }
  for (const auto& [range, sum] : expected_sum) {
    SCOPED_TRACE(range);
    ASSERT_TRUE(metrics.count("score_" + range));
    EXPECT_NEAR(metrics["score_" + range], sum / records[range], 0.005);  // eval.py rounds to 2
    EXPECT_EQ(metrics["records_" + range], records[range]);
    EXPECT_EQ(units["score_" + range], "retrieval_score");
    EXPECT_EQ(units["records_" + range], "count");
  }
}

}  // namespace
}  // namespace kvb
