// run_suite against a result store: runs every cell once, skips complete cells on a second run,
// reruns everything with `fresh`, records a failing cell and goes on, retries only failed cells.
#include "harness/runner/runner.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <sstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

// random-tiny, passkey at 128 tokens, 1 sample, 2 new tokens: full + streaming_llm @ 32.
json small_suite() {
  return {{"name", "runner-test"},
          {"models", {"random-tiny"}},
          {"datasets",
           {{{"name", "passkey"},
             {"params", {{"context_length", 128}, {"samples", 1}, {"max_new_tokens", 2}}}}}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32}},
          {"seeds", {0}}};
}

// The same, plus a streaming_llm config that fails at run time (budget 32 <= 40 sinks).
json suite_with_failing_cell() {
  json j = small_suite();
  j["name"] = "runner-test-failing";
  j["methods"].push_back({{"name", "streaming_llm"}, {"label", "sinks40"}, {"config", {{"sinks", 40}}}});
  return j;
}

int64_t count(const ResultStore& store, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store.handle(), sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  int64_t v = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

// config_json -> (cell id, status) of every cell row in the database.
std::map<std::string, std::pair<int64_t, std::string>> cell_rows(const std::string& db) {
  ResultStore store(db);
  std::map<std::string, std::pair<int64_t, std::string>> rows;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store.handle(), "SELECT config_json, id, status FROM cells", -1,
                               &stmt, nullptr),
            SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const std::string key = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    EXPECT_EQ(rows.count(key), 0u) << "two rows for one config: " << key;
    rows[key] = {sqlite3_column_int64(stmt, 1),
                 reinterpret_cast<const char*>(sqlite3_column_text(stmt, 2))};
  }
  sqlite3_finalize(stmt);
  return rows;
}

class RunnerTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  RunOptions options() const {
    RunOptions o;
    o.db_path = dir.file("runs/r.db");
    o.command = "runner_test";
    return o;
  }
};

TEST_F(RunnerTest, RunsThenSkipsThenFreshRerunsAll) {
  const Suite suite = parse_suite(small_suite(), "runner_test.json");
  ASSERT_EQ(suite.cells().size(), 2u);

  std::ostringstream log1;
  const RunSummary first = run_suite(suite, options(), log1);
  EXPECT_EQ(first.ran, 2) << log1.str();
  EXPECT_EQ(first.skipped, 0);
  EXPECT_EQ(first.failed, 0) << log1.str();
  const auto rows1 = cell_rows(options().db_path);
  ASSERT_EQ(rows1.size(), 2u);
  for (const Cell& c : suite.cells()) {
    ASSERT_EQ(rows1.count(c.key()), 1u) << c.key();
    EXPECT_EQ(rows1.at(c.key()).second, "complete");
  }
  {
    ResultStore store(options().db_path);
    EXPECT_EQ(store.latest_run(), first.run_id);
    EXPECT_EQ(count(store, "SELECT status = 'complete' FROM runs WHERE id = " +
                               std::to_string(first.run_id)),
              1);
    // Every cell stored its sample and its cell-level metrics.
    for (const CellRow& c : store.cells_of_run(first.run_id)) {
      EXPECT_EQ(store.cell_samples(c.id).size(), 1u) << c.method;
      bool has_score = false;
      for (const MetricRow& m : store.cell_metrics(c.id)) has_score |= m.name == "score";
      EXPECT_TRUE(has_score) << c.method;
    }
    // The run's suite JSON and provenance are stored.
    EXPECT_EQ(count(store, "SELECT count(*) FROM runs WHERE suite = 'runner-test' AND "
                           "suite_json LIKE '%streaming_llm%' AND command = 'runner_test'"),
              1);
  }

  std::ostringstream log2;
  const RunSummary second = run_suite(suite, options(), log2);
  EXPECT_EQ(second.ran, 0);
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.failed, 0);
  EXPECT_NE(second.run_id, first.run_id);
  EXPECT_NE(log2.str().find("already complete"), std::string::npos) << log2.str();
  EXPECT_EQ(cell_rows(options().db_path), rows1);  // same rows, untouched

  RunOptions fresh = options();
  fresh.fresh = true;
  std::ostringstream log3;
  const RunSummary third = run_suite(suite, fresh, log3);
  EXPECT_EQ(third.ran, 2);
  EXPECT_EQ(third.skipped, 0);
  EXPECT_EQ(third.failed, 0);
  const auto rows3 = cell_rows(options().db_path);
  ASSERT_EQ(rows3.size(), 2u);
  for (const auto& [key, row] : rows3) {
    EXPECT_EQ(row.second, "complete");
    EXPECT_NE(row.first, rows1.at(key).first) << "not rerun: " << key;
  }
  ResultStore store(options().db_path);
  // --fresh forgot the earlier runs of the suite.
  EXPECT_EQ(count(store, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(RunnerTest, FailingCellIsRecordedAndOthersComplete) {
  const Suite suite = parse_suite(suite_with_failing_cell(), "runner_test.json");
  const std::vector<Cell> cells = suite.cells();
  ASSERT_EQ(cells.size(), 3u);
  const std::string failing_key = cells[2].key();
  ASSERT_EQ(cells[2].method.label, "sinks40");

  std::ostringstream log1;
  const RunSummary first = run_suite(suite, options(), log1);
  EXPECT_EQ(first.ran, 2) << log1.str();
  EXPECT_EQ(first.failed, 1);
  EXPECT_EQ(first.skipped, 0);
  EXPECT_NE(log1.str().find("FAILED"), std::string::npos) << log1.str();

  const auto rows1 = cell_rows(options().db_path);
  ASSERT_EQ(rows1.size(), 3u);
  {
    ResultStore store(options().db_path);
    for (const CellRow& c : store.cells_of_run(first.run_id)) {
      if (c.config_json == failing_key) {
        EXPECT_EQ(c.status, "failed");
        EXPECT_NE(c.error.find("must exceed sinks 40"), std::string::npos) << c.error;
        EXPECT_EQ(c.method, "sinks40");
        EXPECT_TRUE(store.cell_samples(c.id).empty());
      } else {
        EXPECT_EQ(c.status, "complete") << c.method << ": " << c.error;
      }
    }
    EXPECT_EQ(count(store, "SELECT status = 'failures' FROM runs WHERE id = " +
                               std::to_string(first.run_id)),
              1);
  }

  // A rerun retries the failed cell only (it fails again: its config has not changed).
  std::ostringstream log2;
  const RunSummary second = run_suite(suite, options(), log2);
  EXPECT_EQ(second.ran, 0);
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.failed, 1);
  const auto rows2 = cell_rows(options().db_path);
  ASSERT_EQ(rows2.size(), 3u);  // the failed row was replaced, not duplicated
  for (const auto& [key, row] : rows2) {
    if (key == failing_key) {
      EXPECT_EQ(row.second, "failed");
      EXPECT_NE(row.first, rows1.at(key).first) << "the failed cell was not redone";
    } else {
      EXPECT_EQ(row, rows1.at(key)) << "a complete cell was redone: " << key;
    }
  }
  ResultStore store(options().db_path);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(RunnerTest, FixedFailingCellCompletesOnRerun) {
  // The failing config fails at budget 32; with the budget raised it is a different cell that
  // runs, while the cells already complete are skipped.
  const Suite suite = parse_suite(suite_with_failing_cell(), "runner_test.json");
  std::ostringstream log;
  ASSERT_EQ(run_suite(suite, options(), log).failed, 1);
  const Suite raised = parse_suite(suite_with_failing_cell(), "runner_test.json", {"budget=48"});
  const RunSummary second = run_suite(raised, options(), log);
  EXPECT_EQ(second.skipped, 1);  // full takes no budget
  EXPECT_EQ(second.ran, 2) << log.str();
  EXPECT_EQ(second.failed, 0) << log.str();
}

}  // namespace
}  // namespace kvb
