// kvbench report on a database the test fills: the tables' numbers, every plot file produced
// and non-empty, and a self-contained index.html.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/common/error.h"
#include "reports/report.h"
#include "reports/tables.h"
#include "tests/reports/report_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::FakeCell;

// Two passkey context lengths (two dataset groups), Full and two methods at budgets 32 and 64;
// h2o @ 32 at 256 tokens has two seeds.
std::vector<FakeCell> fake_cells() {
  std::vector<FakeCell> cells;
  for (int64_t context : {256, 512}) {
    cells.push_back({"passkey", context, "full", std::nullopt, 0, {100, 100}, 1.0, 4.0, 8192});
    for (int64_t budget : {32, 64}) {
      const double b = double(budget);
      cells.push_back({"passkey", context, "h2o", budget, 0, {0, b}, 0.4, 2.0, 40 * b});
      cells.push_back({"passkey", context, "snapkv", budget, 0, {b, 100}, 0.6, 2.5, 40 * b});
    }
  }
  cells.push_back({"passkey", 256, "h2o", 32, 1, {100, 100}, 0.4, 2.0, 1280});
  return cells;
}

ReportData load(ResultStore& store) { return load_report_data(store, std::nullopt, "fake.db"); }

TEST(ReportTables, MeansOverSeedsWithSampleCounts) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  test::fill_store(store, fake_cells());
  const ReportData data = load(store);
  ASSERT_EQ(groups_of(data), (std::vector<std::string>{"passkey (context_length=256)",
                                                        "passkey (context_length=512)"}));
  EXPECT_EQ(methods_of(data), (std::vector<std::string>{"full", "h2o", "snapkv"}));
  EXPECT_EQ(budgets_of(data), (std::vector<int64_t>{32, 64}));
  const MetricSpec& score = report_metrics()[0];
  auto t = group_table(data, "passkey (context_length=256)", score);
  ASSERT_TRUE(t);
  // h2o @ 32: seed 0 scores mean 16, seed 1 mean 100 -> 58 over 4 samples.
  EXPECT_DOUBLE_EQ(t->at("h2o", 32)->mean, 58.0);
  EXPECT_EQ(t->at("h2o", 32)->samples, 4);
  EXPECT_DOUBLE_EQ(t->at("snapkv", 64)->mean, 82.0);
  EXPECT_DOUBLE_EQ(t->at("full", 64)->mean, 100.0);  // the reference row in every column
  const std::string md = to_markdown(*t);
  EXPECT_NE(md.find("| full (reference) | 100.00 (n=2) | 100.00 (n=2) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| h2o | 58.00 (n=4) | 32.00 (n=2) |"), std::string::npos) << md;
  // Average across the two groups: h2o @ 32 = (58 + 16) / 2.
  auto avg = average_table(data, score);
  ASSERT_TRUE(avg);
  EXPECT_DOUBLE_EQ(avg->at("h2o", 32)->mean, 37.0);
  EXPECT_EQ(avg->at("h2o", 32)->samples, 6);
  // Resident KV in KiB: 40 * 64 bytes = 2.5 KiB.
  auto kv = group_table(data, "passkey (context_length=512)", report_metrics()[3]);
  EXPECT_DOUBLE_EQ(kv->at("snapkv", 64)->mean, 2.5);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Report, WritesEveryPlotTablesAndSelfContainedHtml) {
  const std::string gnuplot = "/usr/bin/gnuplot";
  if (!std::filesystem::exists(gnuplot)) GTEST_SKIP() << "skipped: " << gnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  {
    ResultStore store(dir.file("r.db"));
    test::fill_store(store, fake_cells());
  }
  ReportOptions o;
  o.db = dir.file("r.db");
  o.out = dir.file("out");
  o.plot.gnuplot = gnuplot;
  o.command = "kvbench report --db r.db --out out";
  const ReportFiles files = write_report(o);
  std::vector<std::string> names;
  for (const PlotFile& p : files.plots) names.push_back(p.name);
  const std::vector<std::string> expected = {
      "score_passkey_context_length_256", "score_passkey_context_length_512", "score_average",
      "recall_vs_budget", "kv_memory_vs_budget", "latency_breakdown", "recall_per_layer",
      "needle_passkey_full", "needle_passkey_h2o", "needle_passkey_snapkv"};
  EXPECT_EQ(names, expected);
  for (const std::string& name : expected)
    for (const char* ext : {".png", ".svg", ".gp"}) {
      const std::string path = o.out + "/plots/" + name + ext;
      ASSERT_TRUE(std::filesystem::exists(path)) << path;
      EXPECT_GT(std::filesystem::file_size(path), 100u) << path;
    }
  const std::string md = slurp(files.markdown);
  EXPECT_NE(md.find("### Score: average across datasets (passkey_accuracy)"), std::string::npos);
  EXPECT_NE(md.find("![Recall vs budget](plots/recall_vs_budget.png)"), std::string::npos);
  const std::string html = slurp(files.html);
  EXPECT_NE(html.find("kvbench run fake"), std::string::npos);               // provenance
  EXPECT_NE(html.find("kvbench report --db r.db --out out"), std::string::npos);
  EXPECT_EQ(html.find("src=\"plots/"), std::string::npos);                   // nothing external
  size_t images = 0;
  for (size_t at = html.find("data:image/png;base64,"); at != std::string::npos;
       at = html.find("data:image/png;base64,", at + 1))
    ++images;
  EXPECT_EQ(images, expected.size());
}

TEST(Report, MissingDatabaseIsAnInputError) {
  ReportOptions o;
  o.db = "/nonexistent/x.db";
  o.out = "/tmp/unused";
  EXPECT_THROW(write_report(o), InputError);
}

}  // namespace
}  // namespace kvb
