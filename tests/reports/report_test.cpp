// kvbench report on a database the test fills: the tables' numbers, every plot file produced
// and non-empty, and a self-contained index.html.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "harness/runner/results_table.h"
#include "harness/runner/run_cells.h"
#include "harness/suite/suite.h"
#include "reports/plots.h"
#include "reports/report.h"
#include "reports/tables.h"
#include "tests/reports/colour_test_util.h"
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
  const MetricSpec& kv_spec = *std::find_if(
      report_metrics().begin(), report_metrics().end(),
      [](const MetricSpec& m) { return m.name == "kv_resident_bytes"; });
  auto kv = group_table(data, "passkey (context_length=512)", kv_spec);
  EXPECT_DOUBLE_EQ(kv->at("snapkv", 64)->mean, 2.5);
}

// LongBench-E's length ranges have tables of their own, n= the records in the range.
TEST(ReportTables, LengthRangesCountTheirOwnRecords) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  test::FakeCell full{.dataset = "longbench", .method = "full", .sample_scores = {100, 0, 50, 50, 100},
                      .unit = "qa_f1_score"};
  full.extra_metrics = {{std::nullopt, "score_0-4k", 40.0, "qa_f1_score"},
                        {std::nullopt, "records_0-4k", 3, "count"},
                        {std::nullopt, "score_4-8k", 75.0, "qa_f1_score"},
                        {std::nullopt, "records_4-8k", 2, "count"}};
  test::fill_store(store, {full});
  const ReportData data = load(store);
  std::map<std::string, const MetricSpec*> specs;
  for (const MetricSpec& m : report_metrics()) specs[m.name] = &m;
  const auto short_records = group_table(data, "longbench", *specs.at("score_0-4k"));
  ASSERT_TRUE(short_records);
  EXPECT_DOUBLE_EQ(short_records->at("full", 0)->mean, 40.0);
  EXPECT_EQ(short_records->at("full", 0)->samples, 3);
  EXPECT_NE(short_records->heading.find("under 4k words (qa_f1_score"), std::string::npos)
      << short_records->heading;
  EXPECT_EQ(group_table(data, "longbench", *specs.at("score_4-8k"))->at("full", 0)->samples, 2);
  EXPECT_FALSE(group_table(data, "longbench", *specs.at("score_8k+")));  // no such records
  EXPECT_EQ(group_table(data, "longbench", *specs.at("score"))->at("full", 0)->samples, 5);
}

// A run that lists cells other runs computed (resumed, or shards merged) reproduces with each
// of their commands, its own first.
TEST(ReportTables, ReproduceNamesTheCommandOfEveryRunItsCellsCameFrom) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const std::vector<test::FakeCell> cells = fake_cells();
  test::fill_store(store, {cells[0]});
  RunInfo info;
  info.suite = "fake";
  info.suite_json = R"({"name": "fake"})";
  info.command = "kvbench run fake --shard 1/2";
  info.threads = 4;  // the first run's are 0
  const int64_t second = store.begin_run(info);
  const int64_t id = store.claim_cell(second, test::fake_config(cells[1]), "random-tiny",
                                      cells[1].dataset, cells[1].method, cells[1].budget,
                                      cells[1].seed).cell_id;
  store.complete_cell(id, {}, {}, 0.1);
  store.finish_run(second, "complete");
  const ReportData data = load(store);
  EXPECT_EQ(data.run_id, second);
  EXPECT_EQ(data.command, "kvbench run fake --shard 1/2\nkvbench run fake");
  // Its provenance names the other run and what differs in it.
  ASSERT_EQ(data.other_runs.size(), 1u);
  EXPECT_EQ(data.other_runs[0].cells, 1);
  EXPECT_EQ(data.other_runs[0].differs, "threads `0`");
  EXPECT_NE(report_markdown(data, {}, "kvbench report").find("- cells of run 1 (1): threads `0`\n"),
            std::string::npos);
}

// A run that did not finish says so above its tables; a finished one does not.
TEST(ReportTables, AnInterruptedRunSaysItsTablesArePartial) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const int64_t run = test::fill_store(store, {{"passkey", 256, "full", std::nullopt, 0, {100, 0}}});
  EXPECT_EQ(report_markdown(load(store), {}, "kvbench report").find("did not finish"),
            std::string::npos);
  store.finish_run(run, "interrupted");
  const std::string md = report_markdown(load(store), {}, "kvbench report");
  EXPECT_NE(md.find("> This run did not finish (status: interrupted): the tables show the 1 "
                    "cell of its suite complete in this database; rerun its command to finish "
                    "the rest."),
            std::string::npos)
      << md;
}

// The cells of the run's suite (as stored with the run) that have no complete row are listed
// above the tables, each with what became of it; a suite that cannot be expanded here says so.
TEST(ReportTables, ListsTheSuitesCellsWithoutACompleteResult) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const json suite_json = {
      {"name", "listed"},
      {"models", {"kvbench-tiny-v2"}},
      {"datasets", {{{"name", "passkey"}, {"params", {{"context_length", 256}, {"samples", 1}}}}}},
      {"methods", {"full", "h2o"}},
      {"budgets", {32, 64}},
      {"seeds", {0}}};
  const std::vector<Cell> cells = parse_suite(suite_json, "listed.json").cells();
  ASSERT_EQ(cells.size(), 3u);  // full, h2o @ 32, h2o @ 64
  RunInfo info;
  info.suite = "listed";
  info.suite_json = suite_json.dump();
  info.command = "kvbench run listed.json";
  int64_t run = store.begin_run(info);
  const auto claim = [&](const Cell& c) {
    return store.claim_cell(run, c.key(), c.model, c.dataset.name, c.method.name, c.budget, c.seed)
        .cell_id;
  };
  store.fail_cell(claim(cells[1]), "out of memory\nat layer 3", 0.1);
  // No cell complete yet: no models to name (the sentence once read "Run 1 on .").
  EXPECT_NE(report_markdown(load(store), {}, "kvbench report").find("\n\nRun 1: no cell is complete.\n"),
            std::string::npos);
  store.complete_cell(claim(cells[0]), {}, {{std::nullopt, "score", 100, "passkey_accuracy"}}, 0.1);
  store.finish_run(run, "failures");
  const ReportData data = load(store);
  EXPECT_NE(report_markdown(data, {}, "kvbench report").find("\n\nRun 1 on kvbench-tiny-v2. Each cell"),
            std::string::npos);
  EXPECT_EQ(data.suite_cells, 3);
  ASSERT_EQ(data.missing.size(), 2u);
  EXPECT_EQ(data.missing[0].description, "h2o @ 32 on passkey (kvbench-tiny-v2, seed 0)");
  EXPECT_EQ(data.missing[0].state, "failed: out of memory");
  EXPECT_EQ(data.missing[1].description, "h2o @ 64 on passkey (kvbench-tiny-v2, seed 0)");
  EXPECT_EQ(data.missing[1].state, "not run");
  const std::string md = report_markdown(data, {}, "kvbench report");
  EXPECT_NE(md.find("> 2 of the suite's 3 cells have no complete result in this database"),
            std::string::npos) << md;
  EXPECT_NE(md.find("> - h2o @ 64 on passkey (kvbench-tiny-v2, seed 0): not run\n"),
            std::string::npos) << md;
  EXPECT_NE(report_html(data, {}, "", "kvbench report")
                .find("<li>h2o @ 32 on passkey (kvbench-tiny-v2, seed 0): failed: out of memory</li>"),
            std::string::npos);

  // Resumed until every cell is complete: nothing listed.
  run = store.begin_run(info);
  store.complete_cell(claim(cells[1]), {}, {{std::nullopt, "score", 0, "passkey_accuracy"}}, 0.1);
  store.complete_cell(claim(cells[2]), {}, {{std::nullopt, "score", 0, "passkey_accuracy"}}, 0.1);
  EXPECT_TRUE(load(store).missing.empty());
  EXPECT_EQ(report_markdown(load(store), {}, "kvbench report").find("no complete result"),
            std::string::npos);
}

// A report shows the cells of the reported run's suite config: not another config stored under
// the same suite name (--set max_new_tokens=2 on a second run), but a cell another suite's run
// completed (which a run of this suite skips).
TEST(ReportTables, ShowsTheCellsOfItsOwnSuiteConfigWhoeverStoredThem) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const auto suite_json = [](const std::string& name, int max_new_tokens, json methods) {
    return json{{"name", name},
                {"models", {"kvbench-tiny-v2"}},
                {"datasets", {{{"name", "passkey"}, {"params", {{"samples", 1}}}}}},
                {"methods", methods},
                {"budgets", {32}},
                {"seeds", {0}},
                {"max_new_tokens", max_new_tokens}};
  };
  // One complete run per suite config; returns its id.
  const auto run_all = [&](const json& suite, double score) {
    RunInfo info;
    info.suite = suite["name"];
    info.suite_json = suite.dump();
    info.command = "kvbench run " + info.suite + " # " + std::to_string(score);
    const int64_t run = store.begin_run(info);
    for (const Cell& c : parse_suite(suite, "s.json").cells()) {
      const CellClaim claim =
          store.claim_cell(run, c.key(), c.model, c.dataset.name, c.method.name, c.budget, c.seed);
      if (claim.cell_id)
        store.complete_cell(claim.cell_id, {}, {{std::nullopt, "score", score, "passkey_accuracy"}},
                            0.1);
    }
    store.finish_run(run, "complete");
    return run;
  };
  const int64_t eight = run_all(suite_json("s", 8, {"full", "h2o"}), 100);
  const int64_t two = run_all(suite_json("s", 2, {"full", "h2o"}), 0);
  for (const int64_t run : {eight, two}) {
    const ReportData data = load_report_data(store, run, "r.db");
    ASSERT_EQ(data.cells.size(), 2u) << "run " << run;
    for (const CellData& c : data.cells)
      EXPECT_EQ(c.metrics.at("score"), run == eight ? 100 : 0) << "run " << run;
  }
  const int64_t subset = run_all(suite_json("subset", 8, {"h2o"}), 50);  // skips its one cell
  const ReportData data = load_report_data(store, subset, "r.db");
  ASSERT_EQ(data.cells.size(), 1u);
  EXPECT_EQ(data.cells[0].metrics.at("score"), 100);
  EXPECT_TRUE(data.missing.empty());
  EXPECT_EQ(data.command, "kvbench run subset # 50.000000\nkvbench run s # 100.000000");
}

// A result its suite config's run stored under a config the suite no longer expands to here (an
// earlier kvbench without the dataset's revision; the model or ${SHARED} in another folder) is
// still shown, its cell listed as one a run here would redo; once redone under its key here,
// only the new row shows (nothing counted twice), and a failed redo leaves one row.
TEST(ReportTables, ResultsStoredUnderAnotherConfigOfTheSuiteStillShow) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const json suite = {{"name", "s"},
                      {"models", {"kvbench-tiny-v2"}},
                      {"datasets", {{{"name", "niah_multikey_3"}, {"params", {{"samples", 1}}}},
                                    {{"name", "passkey"}, {"params", {{"samples", 1}}}}}},
                      {"methods", {"full"}},
                      {"budgets", {32}},
                      {"seeds", {0}}};
  const std::vector<Cell> cells = parse_suite(suite, "s.json").cells();
  ASSERT_EQ(cells.size(), 2u);
  json old_niah = cells[0].to_json();
  ASSERT_TRUE(old_niah["dataset"].contains("revision"));
  old_niah["dataset"].erase("revision");  // as a build before the revision stored it
  json moved_passkey = cells[1].to_json();
  moved_passkey["model"] = "/elsewhere/kvbench-tiny-v2";  // another machine's folders
  moved_passkey["method"]["config"]["added_later"] = 1;     // another build's normalisation
  RunInfo info;
  info.suite = "s";
  info.suite_json = suite.dump();
  info.command = "kvbench run s";
  const auto claim = [&](int64_t run, const std::string& key, const Cell& c) {
    return store.claim_cell(run, key, c.model, c.dataset.name, c.method.label, c.budget, c.seed)
        .cell_id;
  };
  const auto complete = [&](int64_t run, const std::string& key, const Cell& c, double score) {
    store.complete_cell(claim(run, key, c), {}, {{std::nullopt, "score", score, "x"}}, 0.1);
  };
  const int64_t first = store.begin_run(info);
  complete(first, old_niah.dump(), cells[0], 10);
  complete(first, moved_passkey.dump(), cells[1], 20);
  store.finish_run(first, "complete");
  ReportData data = load_report_data(store, first, "r.db");
  EXPECT_EQ(data.cells.size(), 2u);
  EXPECT_EQ(data.stored_otherwise, 2);
  EXPECT_EQ(data.missing.size(), 2u);
  EXPECT_NE(report_markdown(data, {}, "kvbench report")
                .find("2 results in the tables stored under another config of their cell"),
            std::string::npos);

  const int64_t second = store.begin_run(info);  // niah redone here; passkey's redo fails
  complete(second, cells[0].key(), cells[0], 30);
  store.fail_cell(claim(second, cells[1].key(), cells[1]), "out of memory", 0.1);
  store.finish_run(second, "failures");
  const RunCells rows = run_cells(store, second);
  ASSERT_EQ(rows.rows.size(), 2u);  // one a cell: niah's new row, passkey's failed redo
  data = load_report_data(store, second, "r.db");
  ASSERT_EQ(data.cells.size(), 1u);
  EXPECT_EQ(data.cells[0].metrics.at("score"), 30);
  EXPECT_EQ(data.stored_otherwise, 0);
  ASSERT_EQ(data.missing.size(), 1u);
  EXPECT_EQ(data.missing[0].state, "failed: out of memory");

  const int64_t third = store.begin_run(info);  // passkey redone here too
  complete(third, cells[1].key(), cells[1], 40);
  store.finish_run(third, "complete");
  data = load_report_data(store, third, "r.db");
  ASSERT_EQ(data.cells.size(), 2u);
  for (const CellData& c : data.cells)
    EXPECT_EQ(c.metrics.at("score"), c.dataset == "passkey" ? 40 : 30) << c.dataset;
  EXPECT_EQ(data.stored_otherwise, 0);
  EXPECT_TRUE(data.missing.empty());
}

// An interrupted run whose suite a later run finished says so, not that its tables are partial.
TEST(ReportTables, AnInterruptedRunFinishedLaterSaysSo) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const json suite = {{"name", "s"},
                      {"models", {"kvbench-tiny-v2"}},
                      {"datasets", {{{"name", "passkey"}, {"params", {{"samples", 1}}}}}},
                      {"methods", {"full"}},
                      {"budgets", {32}},
                      {"seeds", {0, 1}}};
  RunInfo info;
  info.suite = "s";
  info.suite_json = suite.dump();
  info.command = "kvbench run s";
  const std::vector<Cell> cells = parse_suite(suite, "s.json").cells();
  ASSERT_EQ(cells.size(), 2u);
  const auto complete = [&](int64_t run, const Cell& c) {
    store.complete_cell(
        store.claim_cell(run, c.key(), c.model, c.dataset.name, c.method.name, c.budget, c.seed)
            .cell_id,
        {}, {{std::nullopt, "score", 100, "passkey_accuracy"}}, 0.1);
  };
  const int64_t first = store.begin_run(info);
  complete(first, cells[0]);
  store.finish_run(first, "interrupted");
  std::string md = report_markdown(load_report_data(store, first, "r.db"), {}, "kvbench report");
  EXPECT_NE(md.find("the tables show the 1 cell of its suite complete in this database; rerun its "
                    "command to finish the rest."), std::string::npos) << md;
  EXPECT_NE(md.find("> - full @ - on passkey (kvbench-tiny-v2, seed 1): not run"),
            std::string::npos) << md;
  const int64_t second = store.begin_run(info);
  complete(second, cells[1]);
  store.finish_run(second, "complete");
  md = report_markdown(load_report_data(store, first, "r.db"), {}, "kvbench report");
  EXPECT_NE(md.find("> This run did not finish (status: interrupted); its suite's cells are all "
                    "complete in this database (later runs finished them)."),
            std::string::npos) << md;
}

// A damaged database (stored suite JSON and a cell's config that do not parse) is shown, not
// an internal error.
TEST(ReportTables, ADamagedRunIsShownNotACrash) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  RunInfo info;
  info.suite = "s";
  info.suite_json = "{";
  info.command = "kvbench run s";
  const int64_t run = store.begin_run(info);
  store.complete_cell(store.claim_cell(run, "not json", "m", "passkey", "full", 32, 0).cell_id, {},
                      {{std::nullopt, "score", 100, "passkey_accuracy"}}, 0.1);
  store.finish_run(run, "complete");
  std::ostringstream table;
  EXPECT_NO_THROW(print_run(store, run, table));
  EXPECT_NE(table.str().find("its stored suite JSON does not parse"), std::string::npos) << table.str();
  const ReportData data = load_report_data(store, run, "r.db");
  ASSERT_EQ(data.cells.size(), 1u);
  EXPECT_NE(report_html(data, {}, "", "kvbench report").find("<pre>{</pre>"), std::string::npos);
}

TEST(ReportTables, ASuiteThatCannotBeExpandedHereSaysSo) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  test::fill_store(store, {{"passkey", 256, "full", std::nullopt, 0, {100, 0}}});  // {"name": "fake"}
  const ReportData data = load(store);
  EXPECT_TRUE(data.missing.empty());
  EXPECT_NE(data.missing_unknown.find("suite fake as stored with run 1"), std::string::npos)
      << data.missing_unknown;
  EXPECT_NE(report_markdown(data, {}, "kvbench report").find("> The suite's cells could not be "
                                                             "listed here"),
            std::string::npos);
}

// A dataset run both with the question in the window and with its context shared: a table of
// the drop per method and budget, after the score tables.
TEST(ReportTables, TheDropWithTheContextSharedPerMethod) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  std::vector<FakeCell> cells;
  for (bool shared : {false, true}) {
    cells.push_back({.method = "full", .sample_scores = {100, 100}, .shared_context = shared});
    cells.push_back({.method = "snapkv", .budget = 32,
                     .sample_scores = shared ? std::vector<double>{0, 50}
                                             : std::vector<double>{100, 50},
                     .shared_context = shared});
  }
  test::fill_store(store, cells);
  const ReportData data = load(store);
  ASSERT_EQ(groups_of(data), (std::vector<std::string>{"passkey", "passkey (shared context)"}));
  const std::vector<MetricTable> drops = sharing_drop_tables(data);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_DOUBLE_EQ(drops[0].at("snapkv", 32)->mean, 50.0);  // 75 in the window, 25 shared
  EXPECT_DOUBLE_EQ(drops[0].at("full", 32)->mean, 0.0);
  EXPECT_NE(drops[0].heading.find("on passkey"), std::string::npos) << drops[0].heading;
  const std::string md = report_markdown(data, {}, "kvbench report");
  EXPECT_NE(md.find("Score drop when the context is compressed before the question"),
            std::string::npos) << md;
  if (!std::filesystem::exists("/usr/bin/gnuplot")) GTEST_SKIP() << "no gnuplot: plot not drawn";
  const std::vector<PlotFile> plots = write_plots(data, dir.file("plots"), PlotOptions{});
  const auto plot = std::find_if(plots.begin(), plots.end(), [](const PlotFile& p) {
    return p.name == "shared_context_passkey";
  });
  ASSERT_NE(plot, plots.end());
  EXPECT_GT(std::filesystem::file_size(dir.file("plots/shared_context_passkey.png")), 0u);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* const kGnuplot = "/usr/bin/gnuplot";

// The report of `cells` stored in `dir`/r.db, written to `dir`/out with kGnuplot's plots.
ReportOptions report_of(const test::TempDir& dir, const std::vector<test::FakeCell>& cells) {
  {
    ResultStore store(dir.file("r.db"));
    test::fill_store(store, cells);
  }
  ReportOptions o;
  o.db = dir.file("r.db");
  o.out = dir.file("out");
  o.plot.gnuplot = kGnuplot;
  return o;
}

// RULER's random needle places give every sample its own depth: past 11 distinct depths the
// heatmap's rows are the nearest tenths (30 evenly spread depths here: 11 rows).
TEST(Report, NeedleHeatmapGroupsManyDepthsIntoTenths) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  const ReportOptions o = report_of(
      dir, {{"passkey", 256, "full", std::nullopt, 0, std::vector<double>(30, 100)},
            {"passkey", 256, "h2o", 32, 0, std::vector<double>(30, 50)}});
  write_report(o);
  const std::string script = slurp(o.out + "/plots/needle_passkey_full.gp");
  const size_t tics = script.find("set ytics (");
  ASSERT_NE(tics, std::string::npos) << script;
  const std::string line = script.substr(tics, script.find('\n', tics) - tics);
  EXPECT_NE(line.find("('0%%' 0, '10%%' 1, '20%%' 2, "), std::string::npos) << line;
  EXPECT_NE(line.find(", '90%%' 9, '100%%' 10)"), std::string::npos) << line;
}

TEST(Report, WritesEveryPlotTablesAndSelfContainedHtml) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  ReportOptions o = report_of(dir, fake_cells());
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
  EXPECT_NE(md.find("### Score (passkey_accuracy, higher is better), average across datasets"),
            std::string::npos) << md;
  EXPECT_NE(md.find("### Resident KV (KiB, lower is better) on passkey (context_length=256)"),
            std::string::npos) << md;
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

std::string plot_script(const ReportFiles& files, const std::string& out, const std::string& name) {
  for (const PlotFile& p : files.plots)
    if (p.name == name) return slurp(out + "/plots/" + name + ".gp");
  ADD_FAILURE() << "no plot " << name;
  return "";
}

// What the heads hold has its table beside the pools' capacity, and the memory plot shows it
// where the run stored it (results stored before kv_used_bytes plot the capacity).
TEST(ReportTables, TheKVTheHeadsHoldIsShownBesideTheResidentKV) {
  test::TempDir dir;
  {
    ResultStore store(dir.file("r.db"));
    test::FakeCell h2o{.method = "h2o", .budget = 32, .sample_scores = {100}, .kv_bytes = 4096};
    h2o.extra_metrics = {{std::nullopt, "kv_used_bytes", 3072, "bytes"}};
    test::fill_store(store, {h2o});
  }
  ResultStore store(dir.file("r.db"));
  const ReportData data = load(store);
  std::map<std::string, const MetricSpec*> specs;
  for (const MetricSpec& m : report_metrics()) specs[m.name] = &m;
  ASSERT_EQ(groups_of(data).size(), 1u);
  const std::string group = groups_of(data)[0];
  const auto held = group_table(data, group, *specs.at("kv_used_bytes"));
  ASSERT_TRUE(held);
  EXPECT_DOUBLE_EQ(held->at("h2o", 32)->mean, 3.0);
  EXPECT_NE(held->heading.find("KV the heads hold (KiB, lower is better)"), std::string::npos)
      << held->heading;
  EXPECT_DOUBLE_EQ(group_table(data, group, *specs.at("kv_resident_bytes"))->at("h2o", 32)->mean,
                   4.0);
  if (!std::filesystem::exists("/usr/bin/gnuplot")) GTEST_SKIP() << "no gnuplot: plot not drawn";
  ReportOptions o{dir.file("r.db"), dir.file("out")};
  o.plot.gnuplot = "/usr/bin/gnuplot";
  const ReportFiles files = write_report(o);
  const std::string memory = slurp(o.out + "/plots/kv_memory_vs_budget.gp");
  EXPECT_NE(memory.find("set title 'KV the heads hold (KiB"), std::string::npos) << memory;
  EXPECT_NE(memory.find("\n32 3\n"), std::string::npos) << memory;  // 3072 bytes, not 4096
}

// A resumed run whose older cells were stored before kv_used_bytes existed plots the pools'
// capacity for every cell, not what the heads hold for the newer cells alone.
TEST(ReportPlots, AMemoryPlotMixingOldAndNewCellsPlotsTheCapacity) {
  if (!std::filesystem::exists("/usr/bin/gnuplot")) GTEST_SKIP() << "no gnuplot: plot not drawn";
  test::TempDir dir;
  {
    ResultStore store(dir.file("r.db"));
    test::FakeCell newer{.method = "h2o", .budget = 32, .sample_scores = {100}, .kv_bytes = 4096};
    newer.extra_metrics = {{std::nullopt, "kv_used_bytes", 3072, "bytes"}};
    test::FakeCell older{.method = "snapkv", .budget = 32, .sample_scores = {100}, .kv_bytes = 8192};
    test::fill_store(store, {newer, older});
  }
  ReportOptions o{dir.file("r.db"), dir.file("out")};
  o.plot.gnuplot = "/usr/bin/gnuplot";
  const ReportFiles files = write_report(o);
  const std::string memory = slurp(o.out + "/plots/kv_memory_vs_budget.gp");
  EXPECT_NE(memory.find("set title 'Resident KV"), std::string::npos) << memory;
  EXPECT_NE(memory.find("\n32 4\n"), std::string::npos) << memory;  // h2o's capacity, 4096 bytes
  EXPECT_NE(memory.find("\n32 8\n"), std::string::npos) << memory;  // snapkv's, 8192 bytes
}

// Several models: each gets its own average table and its own summary plots and heatmaps
// (named and titled with it); nothing is averaged across models.
TEST(ReportPlots, SummariesAreOnePerModelNeverAveragedAcrossThem) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  std::vector<FakeCell> cells;
  for (const std::string model : {"m-a", "m_a"})  // their names slug alike
    for (int64_t context : {256, 512})
      for (int64_t budget : {32, 64}) {
        FakeCell c{"passkey", context, "h2o", budget, 0, {model == "m-a" ? 100.0 : 0.0, 0}};
        c.model = model;
        cells.push_back(c);
      }
  ReportOptions o = report_of(dir, cells);
  const ReportFiles files = write_report(o);
  std::set<std::string> names;
  for (const PlotFile& p : files.plots) names.insert(p.name);
  // Each model's own files: the second model's names, which slug alike, numbered.
  for (const std::string name : {"score_average_m_a", "score_average_m_a_2", "recall_vs_budget_m_a",
                                 "latency_breakdown_m_a_2", "needle_passkey_h2o_m_a",
                                 "needle_passkey_h2o_m_a_2", "score_passkey_context_length_256_on_m_a",
                                 "score_passkey_context_length_256_on_m_a_2"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(names.size(), files.plots.size()) << "a name twice";
  EXPECT_FALSE(names.count("score_average"));
  EXPECT_NE(plot_script(files, o.out, "needle_passkey_h2o_m_a").find("at budget 64 on m-a"),
            std::string::npos);
  EXPECT_NE(plot_script(files, o.out, "needle_passkey_h2o_m_a_2").find("at budget 64 on m_a"),
            std::string::npos);
  const std::string md = slurp(files.markdown);
  // m-a scores 50 everywhere, m_a 0: an average across models would read 25.
  EXPECT_NE(md.find("average across datasets on m-a"), std::string::npos) << md;
  EXPECT_NE(md.find("average across datasets on m_a"), std::string::npos) << md;
  EXPECT_EQ(md.find("25.00"), std::string::npos) << md;
}

// Two cells whose model folders share their last name ("runs/a/final", "runs/b/final"): each
// gets its own row stored under an older config, by its exact folder; where the folders moved,
// a row that could be either cell's is shown as neither's.
TEST(ReportTables, AStandInGoesToItsOwnCellOrToNone) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  const auto model_dir = [&](const std::string& run) {
    const std::string path = dir.file("runs/" + run + "/final");
    std::filesystem::create_directories(path);
    return path;
  };
  const json suite = {{"name", "s"},
                      {"models", {model_dir("a"), model_dir("b")}},
                      {"datasets", {{{"name", "passkey"}, {"params", {{"samples", 1}}}}}},
                      {"methods", {"full"}},
                      {"budgets", {32}},
                      {"seeds", {0}}};
  const std::vector<Cell> cells = parse_suite(suite, "s.json").cells();
  ASSERT_EQ(cells.size(), 2u);
  RunInfo info;
  info.suite = "s";
  info.suite_json = suite.dump();
  info.command = "kvbench run s";
  const int64_t run = store.begin_run(info);
  const auto store_old = [&](const Cell& c, const std::string& model, double score) {
    json config = c.to_json();
    config["model"] = model;
    config["method"]["config"]["added_later"] = 1;  // stored by an older build
    store.complete_cell(store.claim_cell(run, config.dump(), model, c.dataset.name,
                                         c.method.label, c.budget, c.seed).cell_id,
                        {}, {{std::nullopt, "score", score, "x"}}, 0.1);
  };
  // Stored in the other order, so the first cell meets b's row first.
  store_old(cells[1], cells[1].model, 20);
  store_old(cells[0], cells[0].model, 10);
  store.finish_run(run, "complete");
  ReportData data = load_report_data(store, run, "r.db");
  ASSERT_EQ(data.cells.size(), 2u);
  for (const CellData& c : data.cells)
    EXPECT_EQ(c.metrics.at("score"), c.model == cells[0].model ? 10 : 20) << c.model;

  test::TempDir other;
  ResultStore moved(other.file("r.db"));
  const int64_t moved_run = moved.begin_run(info);
  for (const Cell& c : cells) {
    json config = c.to_json();
    config["model"] = "/elsewhere/" + std::string(c.model == cells[0].model ? "a" : "b") + "/final";
    config["method"]["config"]["added_later"] = 1;
    moved.complete_cell(moved.claim_cell(moved_run, config.dump(), config["model"], c.dataset.name,
                                         c.method.label, c.budget, c.seed).cell_id,
                        {}, {{std::nullopt, "score", 1, "x"}}, 0.1);
  }
  moved.finish_run(moved_run, "complete");
  const RunCells rows = run_cells(moved, moved_run);
  EXPECT_TRUE(rows.rows.empty());  // "final" names both cells' folders
  EXPECT_EQ(rows.missing.size(), 2u);

  // A moved row that could be either cell's stays nobody's even once one of them is complete
  // under its key here.
  test::TempDir third;
  ResultStore half(third.file("r.db"));
  const int64_t half_run = half.begin_run(info);
  half.complete_cell(half.claim_cell(half_run, cells[0].key(), cells[0].model, "passkey", "full",
                                     cells[0].budget, cells[0].seed).cell_id,
                     {}, {{std::nullopt, "score", 1, "x"}}, 0.1);
  half.complete_cell(half.claim_cell(half_run, R"({"model": "/elsewhere/a/final"})", "m",
                                     "passkey", "full", 32, 0).cell_id, {}, {}, 0.1);
  json moved_a = cells[0].to_json();
  moved_a["model"] = "/elsewhere/a/final";
  half.complete_cell(half.claim_cell(half_run, moved_a.dump(), "m", "passkey", "full",
                                     cells[0].budget, cells[0].seed).cell_id, {}, {}, 0.1);
  half.finish_run(half_run, "complete");
  const RunCells half_rows = run_cells(half, half_run);
  EXPECT_EQ(half_rows.rows.size(), 1u);
  ASSERT_EQ(half_rows.missing.size(), 1u);
  EXPECT_EQ(half_rows.missing[0].state, "not run");

  // A stored config of another shape (a damaged or foreign row) is nobody's, not an exception.
  const int64_t odd = moved.begin_run(info);
  for (const std::string config : {R"({"method": "full", "dataset": "passkey"})", R"([1, 2])",
                                   "not json",
                                   R"({"method": {"label": null}, "dataset": {"params": 3}})"})
    moved.complete_cell(moved.claim_cell(odd, config, "m", "passkey", "full", 32, 0).cell_id, {},
                        {}, 0.1);
  moved.finish_run(odd, "complete");
  EXPECT_EQ(run_cells(moved, odd).missing.size(), 2u);
}

// A method label with a '%' (gnuplot reads tic labels as formats) is drawn as written, and the
// report is written: "keep 20%" made gnuplot fail, "50%s" drew a number.
TEST(ReportPlots, APercentInAMethodLabelIsDrawnAsWritten) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  std::vector<FakeCell> cells;
  for (const char* label : {"keep 20%", "sllm 50%s"})
    for (int64_t budget : {32, 64})
      cells.push_back({"passkey", 256, label, budget, 0, {100, 0}});
  ReportOptions o = report_of(dir, cells);
  const ReportFiles files = write_report(o);
  EXPECT_TRUE(std::filesystem::exists(files.html));
  const std::string script = plot_script(files, o.out, "latency_breakdown");
  EXPECT_NE(script.find("'keep 20%%' 0, 'sllm 50%%s' 1"), std::string::npos) << script;
}

// The plot scripts: direction on every value axis, one style per method, coinciding series
// named, the latency legend drawn in the bars' colours, a missing Full reference said.
TEST(ReportPlots, SayWhatIsBetterAndKeepEverySeriesVisible) {
  const std::string gnuplot = "/usr/bin/gnuplot";
  if (!std::filesystem::exists(gnuplot)) GTEST_SKIP() << "skipped: " << gnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  {
    ResultStore store(dir.file("r.db"));
    std::vector<FakeCell> cells;
    cells.push_back({"perplexity", 256, "full", std::nullopt, 0, {50}, 1.0, 4.0, 8192});
    for (int64_t budget : {32, 64}) {  // h2o and snapkv keep the same KV; snapkv is better
      cells.push_back({"perplexity", 256, "h2o", budget, 0, {60}, 0.4, 2.0, 40.0 * budget});
      cells.push_back({"perplexity", 256, "snapkv", budget, 0, {55}, 0.6, 2.5, 40.0 * budget});
    }
    for (FakeCell& c : cells) c.unit = "perplexity";
    test::fill_store(store, cells);
  }
  ReportOptions o{dir.file("r.db"), dir.file("out")};
  o.plot.gnuplot = gnuplot;
  const ReportFiles files = write_report(o);

  const std::string score = plot_script(files, o.out, "score_perplexity");
  EXPECT_NE(score.find("set title 'Score (perplexity, lower is better)'"), std::string::npos) << score;
  EXPECT_NE(score.find("set ylabel 'perplexity (lower is better)'"), std::string::npos) << score;
  const std::map<std::string, MethodStyle> styles = method_styles({"full", "h2o", "snapkv"});
  for (const char* m : {"h2o", "snapkv"})
    EXPECT_NE(score.find(" pt " + std::to_string(styles.at(m).point) + " ps 1.3 lw 2 lc rgb '" +
                         styles.at(m).colour + "' dt " + styles.at(m).dash),
              std::string::npos)
        << m << ":\n" << score;

  const std::string memory = plot_script(files, o.out, "kv_memory_vs_budget");
  EXPECT_NE(memory.find("title 'snapkv = h2o'"), std::string::npos) << memory;
  EXPECT_NE(memory.find("set ylabel 'KiB (lower is better)'"), std::string::npos) << memory;

  const std::string latency = plot_script(files, o.out, "latency_breakdown");
  for (const char* part : {"with boxes lc rgb '#cccccc' title 'rest of the step'",
                           "with boxes lc rgb '#4c72b0' title 'attention'",
                           "with boxes lc rgb '#dd8452' title 'selection'"})
    EXPECT_NE(latency.find(part), std::string::npos) << part << ":\n" << latency;
  EXPECT_EQ(latency.find("notitle"), std::string::npos) << "a part without a legend entry:\n" << latency;
  EXPECT_NE(latency.find("(lower is better)"), std::string::npos) << latency;

  // Without Full, the plot says so.
  EXPECT_EQ(score.find("No Full"), std::string::npos) << score;
  test::TempDir no_full;
  {
    ResultStore store(no_full.file("r.db"));
    test::fill_store(store, {{"passkey", 256, "h2o", 32, 0, {10}}, {"passkey", 256, "h2o", 64, 0, {20}}});
  }
  ReportOptions n{no_full.file("r.db"), no_full.file("out")};
  n.plot.gnuplot = gnuplot;
  const ReportFiles without = write_report(n);
  const std::string recall = plot_script(without, n.out, "recall_vs_budget");
  EXPECT_NE(recall.find("No Full (reference) row in this run."), std::string::npos) << recall;
  EXPECT_NE(plot_script(without, n.out, "recall_per_layer").find("No Full row in this run"),
            std::string::npos);
}

TEST(ReportPlots, ColourDifferenceMatchesPublishedCiede2000Values) {
  // Sharma, Wu & Dalal (2005), Table 1, pairs 1 and 7.
  EXPECT_NEAR(test::ciede2000({50, 2.6772, -79.7751}, {50, 0, -82.7485}), 2.0425, 1e-4);
  EXPECT_NEAR(test::ciede2000({50, 0, 0}, {50, -1, 2}), 2.3669, 1e-4);
  EXPECT_NEAR(test::colour_difference("#000000", "#ffffff", test::Vision::normal), 100.0, 1e-3);
}

// A config of a method takes the method's style when the method itself is not plotted; other
// labels get styles of their own.
TEST(ReportPlots, ConfigsOfAMethodLookLikeItUnlessItIsPlotted) {
  const auto alone = method_styles({"full", "ada_snapkv_w8"});
  const auto both = method_styles({"h2o", "h2o_prefill", "custom"});
  EXPECT_EQ(alone.at("ada_snapkv_w8").colour, method_styles({"ada_snapkv"}).at("ada_snapkv").colour);
  EXPECT_NE(both.at("h2o_prefill").colour, both.at("h2o").colour);
  EXPECT_NE(both.at("h2o_prefill").colour, both.at("custom").colour);
  EXPECT_NE(both.at("h2o_prefill").point, both.at("custom").point);
}

// Colours stay apart for the 12 registered methods, also for colour-blind readers, and no two
// methods share a marker.
TEST(ReportPlots, MethodStylesAreDistinct) {
  const std::map<std::string, MethodStyle> styles = method_styles(
      {"full", "oracle_topk", "streaming_llm", "h2o", "snapkv", "pyramidkv", "ada_snapkv",
       "kv_compress", "quest", "infinigen", "clusterkv", "pqcache"});
  std::set<int> points;
  for (const auto& [name, style] : styles) {
    if (name != "full") {  // drawn as a level, without markers
      EXPECT_TRUE(points.insert(style.point).second) << name << " shares a marker";
    }
    EXPECT_EQ(style.dash == "2", name == "full") << name << ": dashes \"2\" mark references";
  }
  for (const auto& [a, sa] : styles)
    for (const auto& [b, sb] : styles) {
      if (a >= b) continue;
      EXPECT_GE(test::colour_difference(sa.colour, sb.colour, test::Vision::normal), 20.0) << a << " " << b;
      for (test::Vision v : {test::Vision::deuteranopia, test::Vision::protanopia, test::Vision::tritanopia})
        EXPECT_GE(test::colour_difference(sa.colour, sb.colour, v), 10.0)
            << a << " " << b << " for vision " << int(v);
    }
}

TEST(Report, ABudgetNoCellHasIsRefusedBeforeAnythingIsWritten) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  test::fill_store(store, fake_cells());
  ReportOptions o;
  o.db = dir.file("r.db");
  o.out = dir.file("report");
  o.plots = false;
  o.plot.budget = 999;
  try {
    write_report(o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--budget 999: no cell of run 1 has it (its budgets: 32, 64)"),
              std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

// A '|' in a label split its row into one cell too many (the values shifted a column), and a
// label or suite name went into the Markdown as raw HTML.
TEST(ReportTables, LabelsAreMarkdownTextNotSyntax) {
  test::TempDir dir;
  std::vector<test::FakeCell> cells = fake_cells();
  for (test::FakeCell& c : cells)
    if (c.method == "h2o") c.method = "<b>h2o</b> a|b";
  ResultStore store(dir.file("r.db"));
  test::fill_store(store, cells);
  const std::string md = report_markdown(load(store), {}, "kvbench report");
  const size_t row = md.find("| &lt;b&gt;h2o&lt;/b&gt; a\\|b |");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string line = md.substr(row, md.find('\n', row) - row);
  const size_t header = md.find("| method |");
  const std::string head = md.substr(header, md.find('\n', header) - header);
  // As many unescaped separators as the header has.
  auto separators = [](const std::string& text) {
    int n = 0;
    for (size_t i = 0; i < text.size(); ++i) n += text[i] == '|' && (i == 0 || text[i - 1] != '\\');
    return n;
  };
  EXPECT_EQ(separators(line), separators(head)) << line << "\n" << head;
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
}

// A run whose every cell failed was refused ("no complete cells"): its failures are the report.
TEST(Report, ARunWhoseCellsAllFailedIsReportedWithItsFailures) {
  test::TempDir dir;
  {
    ResultStore store(dir.file("r.db"));
    const json suite_json = {
        {"name", "failing"},
        {"models", {"kvbench-tiny-v2"}},
        {"datasets", {{{"name", "passkey"}, {"params", {{"context_length", 256}, {"samples", 1}}}}}},
        {"methods", {"h2o"}},
        {"budgets", {32}}};
    const Cell cell = parse_suite(suite_json, "failing.json").cells().at(0);
    RunInfo info;
    info.suite = "failing";
    info.suite_json = suite_json.dump();
    info.command = "kvbench run failing.json";
    const int64_t run = store.begin_run(info);
    const int64_t id = store.claim_cell(run, cell.key(), cell.model, cell.dataset.name,
                                        cell.method.name, cell.budget, cell.seed).cell_id;
    store.fail_cell(id, "out of memory\nat layer 3", 0.1);
    store.finish_run(run, "failures");
  }
  ReportOptions o;
  o.db = dir.file("r.db");
  o.out = dir.file("out");
  o.plot.gnuplot = "/nonexistent/gnuplot";  // no plot to draw: not even looked for
  const ReportFiles files = write_report(o);
  const std::string md = slurp(files.markdown);
  EXPECT_NE(md.find("failed: out of memory"), std::string::npos) << md;
  EXPECT_EQ(md.find("at layer 3"), std::string::npos) << md;
}

// gnuplot failing on a plot left a report of two runs: the new .gp beside the old pictures,
// report.md and index.html, and a stray log. It now leaves the earlier report as it was.
TEST(Report, AGnuplotThatFailsLeavesTheEarlierReportWhole) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  test::TempDir dir;
  ReportOptions o = report_of(dir, fake_cells());
  write_report(o);
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(o.out))
      names.push_back(e.path().string() + ":" +
                      (e.is_regular_file() ? slurp(e.path().string()) : std::string("dir")));
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = listing();
  ASSERT_GT(before.size(), 3u);
  o.plot.gnuplot = "/bin/false";
  try {
    write_report(o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/bin/false failed on plot "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("exit status"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(), before);
}

// A relative --gnuplot was checked from the current folder and run from plots/ (not found);
// a bare name was refused though in PATH.
TEST(ReportPlots, GnuplotIsARelativePathOrANameInPath) {
  if (!std::filesystem::exists(kGnuplot)) GTEST_SKIP() << "skipped: " << kGnuplot << " is absent (apt-get install gnuplot-nox)";
  EXPECT_EQ(find_gnuplot(kGnuplot), kGnuplot);
  const char* path = std::getenv("PATH");
  setenv("PATH", "/nonexistent:/usr/bin", 1);
  EXPECT_EQ(find_gnuplot("gnuplot"), kGnuplot);
  EXPECT_THROW(find_gnuplot("no-such-gnuplot"), InputError);
  setenv("PATH", path ? path : "", 1);
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path("/usr");
  EXPECT_EQ(find_gnuplot("bin/gnuplot"), kGnuplot);
  EXPECT_EQ(find_gnuplot("./bin/gnuplot"), "/usr/./bin/gnuplot");
  std::filesystem::current_path(here);
  EXPECT_THROW(find_gnuplot("/etc/passwd"), InputError);  // not executable
}

TEST(Report, MissingDatabaseIsAnInputError) {
  ReportOptions o;
  o.db = "/nonexistent/x.db";
  o.out = "/tmp/unused";
  EXPECT_THROW(write_report(o), InputError);
}

}  // namespace
}  // namespace kvb
