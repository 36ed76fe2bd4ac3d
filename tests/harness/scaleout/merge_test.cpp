// Sharded runs and their merge: the shards of a suite merged equal a single-process run cell
// for cell (timings aside); merging refuses mixed suites and schema versions, writes nothing
// then, and keeps one row per config (the complete one) however often a cell was run.
#include "harness/scaleout/merge.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/common/error.h"
#include "harness/runner/runner.h"
#include "harness/scaleout/shard.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

// random-tiny, passkey at 384 tokens, 1 sample, 2 new tokens: full + streaming_llm @ 32, 48
// = 3 cells, a few seconds in all.
json small_suite(const std::string& name = "merge-test") {
  return {{"name", name},
          {"models", {"random-tiny"}},
          {"datasets", {{{"name", "passkey"},
                         {"params", {{"context_length", 384}, {"samples", 1},
                                     {"max_new_tokens", 2}}}}}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32, 48}},
          {"seeds", {0}}};
}

std::vector<std::vector<std::string>> query(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << db;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(h);
  std::vector<std::vector<std::string>> rows;
  while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const unsigned char* t = sqlite3_column_text(stmt, i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(h);
  return rows;
}

int64_t count(const std::string& db, const std::string& sql) {
  return std::stoll(query(db, sql).at(0).at(0));
}

void exec(const std::string& db, const std::string& sql) {
  ResultStore store(db);
  ASSERT_EQ(sqlite3_exec(store.handle(), sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
}

// Everything a database says about its complete cells, keyed by config, timings left out
// (names ending in _s, _ms_per_token[.layerN], elapsed, prefill_method_share): samples (prediction,
// answers, score, input length) and metrics (cell- and sample-level).
std::map<std::string, std::string> content(const std::string& db) {
  std::map<std::string, std::string> out;
  for (const auto& row : query(db, "SELECT id, config_json FROM cells WHERE status = 'complete'")) {
    std::ostringstream s;
    for (const auto& r : query(db, "SELECT sample_id, input_length, prediction, answers_json, "
                                   "printf('%.17g', score) FROM samples WHERE cell_id = " +
                                       row[0] + " ORDER BY sample_id"))
      for (const auto& v : r) s << v << "|";
    s << "\n";
    for (const auto& r : query(db, "SELECT coalesce(sample_id, '-'), name, printf('%.17g', value), "
                                   "unit FROM metrics WHERE cell_id = " + row[0] +
                                       " AND name NOT LIKE '%\\_s' ESCAPE '\\' AND name NOT LIKE "
                                       "'%ms\\_per\\_token%' ESCAPE '\\' AND name NOT IN ('elapsed', "
                                       "'prefill_method_share') "
                                       "ORDER BY 1, 2"))
      for (const auto& v : r) s << v << "|";
    EXPECT_EQ(out.count(row[1]), 0u) << db << ": two complete rows for " << row[1];
    out[row[1]] = s.str();
  }
  return out;
}

class MergeTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  RunSummary run(const json& suite_json, const std::string& db,
                 std::optional<ShardSpec> shard = std::nullopt) {
    const Suite suite = parse_suite(suite_json, "merge_test.json");
    RunOptions o;
    o.db_path = db;
    // As on the command line, which names the shard and the database.
    o.command = "merge_test " + db + (shard ? " --shard " + shard_text(*shard) : "");
    o.shard = shard;
    std::ostringstream log;
    RunSummary summary = run_suite(suite, o, log);
    EXPECT_EQ(summary.failed, 0) << log.str();
    return summary;
  }
};

TEST_F(MergeTest, ShardsMergedEqualASingleRunCellForCell) {
  const Suite suite = parse_suite(small_suite(), "merge_test.json");
  ASSERT_EQ(suite.cells().size(), 3u);
  const RunSummary single = run(small_suite(), dir.file("single.db"));
  EXPECT_EQ(single.ran, 3);
  const RunSummary s0 = run(small_suite(), dir.file("s0.db"), ShardSpec{0, 2});
  const RunSummary s1 = run(small_suite(), dir.file("s1.db"), ShardSpec{1, 2});
  EXPECT_EQ(s0.ran + s1.ran, 3);
  EXPECT_GT(s0.ran, 0);
  EXPECT_GT(s1.ran, 0);
  // Each shard database holds exactly its shard's cells.
  for (int i = 0; i < 2; ++i) {
    const std::string db = dir.file("s" + std::to_string(i) + ".db");
    const auto cells = cells_of_shard(suite.cells(), ShardSpec{i, 2});
    EXPECT_EQ(count(db, "SELECT count(*) FROM cells"), int64_t(cells.size()));
    for (const Cell& c : cells) EXPECT_EQ(content(db).count(c.key()), 1u);
  }
  // Half a study is missing cells...
  const MergeSummary half = merge_databases(dir.file("half.db"), {dir.file("s0.db")});
  EXPECT_EQ(half.cells, s0.ran);
  EXPECT_EQ(missing_cells(dir.file("half.db"), suite).size(), size_t(s1.ran));

  const MergeSummary m = merge_databases(dir.file("merged.db"), {dir.file("s0.db"), dir.file("s1.db")});
  EXPECT_EQ(m.suite, "merge-test");
  EXPECT_EQ(m.cells, 3);
  EXPECT_EQ(m.complete, 3);
  EXPECT_EQ(m.runs, 2);
  EXPECT_EQ(m.duplicates, 0);
  EXPECT_TRUE(missing_cells(dir.file("merged.db"), suite).empty());
  const auto merged = content(dir.file("merged.db"));
  EXPECT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged, content(dir.file("single.db")));
  {
    ResultStore store(dir.file("merged.db"));
    EXPECT_EQ(store.integrity_check(), "ok");
    // `show last` sees the whole suite: cells of every run of it.
    EXPECT_EQ(store.cells_of_run(*store.latest_run()).size(), 3u);
  }
  EXPECT_EQ(count(dir.file("merged.db"), "SELECT count(*) FROM runs WHERE command LIKE "
                                        "'merge_test %--shard %'"), 2);
  // Timing metrics are copied too, only not compared.
  EXPECT_GT(count(dir.file("merged.db"), "SELECT count(*) FROM metrics WHERE name = 'prefill_s'"), 0);

  // Merging again into the existing output (plus the shards again) duplicates nothing.
  const MergeSummary again = merge_databases(dir.file("merged.db"),
                                             {dir.file("s1.db"), dir.file("s0.db"), dir.file("s0.db")});
  EXPECT_EQ(again.cells, 3);
  EXPECT_EQ(again.runs, 2);
  EXPECT_EQ(again.duplicates, 3);
  EXPECT_EQ(count(dir.file("merged.db"), "SELECT count(*) FROM cells"), 3);
  EXPECT_EQ(count(dir.file("merged.db"), "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(content(dir.file("merged.db")), content(dir.file("single.db")));
  EXPECT_FALSE(fs::exists(dir.file("merged.db-wal")) &&
               fs::file_size(dir.file("merged.db-wal")) > 0);
}

TEST_F(MergeTest, KeepsTheCompleteRowOfACellRunTwice) {
  const Suite suite = parse_suite(small_suite(), "merge_test.json");
  run(small_suite(), dir.file("a.db"));
  run(small_suite(), dir.file("b.db"));
  // In a, one cell was interrupted (left "running", its results gone); in b another failed.
  const std::string k0 = suite.cells()[0].key(), k1 = suite.cells()[1].key();
  auto quoted = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
  };
  exec(dir.file("a.db"), "DELETE FROM samples WHERE cell_id IN (SELECT id FROM cells WHERE "
                         "config_json = " + quoted(k0) + "); DELETE FROM metrics WHERE cell_id IN "
                         "(SELECT id FROM cells WHERE config_json = " + quoted(k0) + "); "
                         "UPDATE cells SET status = 'running', finished_at = NULL WHERE "
                         "config_json = " + quoted(k0));
  exec(dir.file("b.db"), "DELETE FROM samples WHERE cell_id IN (SELECT id FROM cells WHERE "
                         "config_json = " + quoted(k1) + "); DELETE FROM metrics WHERE cell_id IN "
                         "(SELECT id FROM cells WHERE config_json = " + quoted(k1) + "); "
                         "UPDATE cells SET status = 'failed', error = 'boom', finished_at = "
                         "'2999-01-01T00:00:00Z' WHERE config_json = " + quoted(k1));
  // A third database holds only a later failure of the cell a interrupted.
  run(small_suite(), dir.file("c.db"));
  exec(dir.file("c.db"), "DELETE FROM cells WHERE config_json != " + quoted(k0) +
                         "; UPDATE cells SET status = 'failed', error = 'late' WHERE 1");
  for (const auto& order : std::vector<std::vector<std::string>>{
           {"a.db", "b.db", "c.db"}, {"c.db", "b.db", "a.db"}, {"b.db", "c.db", "a.db"}}) {
    std::vector<std::string> inputs;
    for (const auto& f : order) inputs.push_back(dir.file(f));
    const std::string out = dir.file("out-" + order[0]);
    const MergeSummary m = merge_databases(out, inputs);
    EXPECT_EQ(m.cells, 3);
    EXPECT_EQ(m.complete, 3) << "every config was complete somewhere";
    EXPECT_EQ(m.duplicates, 4);
    EXPECT_EQ(count(out, "SELECT count(*) FROM cells"), 3);
    EXPECT_EQ(count(out, "SELECT count(*) FROM cells WHERE status = 'complete'"), 3);
    EXPECT_EQ(count(out, "SELECT count(*) FROM (SELECT DISTINCT config_json FROM cells)"), 3);
    // Each kept row brought its own samples and metrics, nothing more.
    EXPECT_EQ(count(out, "SELECT count(*) FROM samples"), 3);
    EXPECT_EQ(count(out, "SELECT count(DISTINCT cell_id) FROM metrics"), 3);
    EXPECT_EQ(content(out).size(), 3u);
    EXPECT_TRUE(missing_cells(out, suite).empty());
    EXPECT_TRUE(query(out, "PRAGMA foreign_key_check").empty());
  }
  // Without any complete row, the latest failure is kept over an interrupted row.
  const MergeSummary m = merge_databases(dir.file("partial.db"), {dir.file("a.db"), dir.file("c.db")});
  EXPECT_EQ(m.complete, 2);
  EXPECT_EQ(query(dir.file("partial.db"), "SELECT status, error FROM cells WHERE config_json = " +
                                              quoted(k0)),
            (std::vector<std::vector<std::string>>{{"failed", "late"}}));
  EXPECT_EQ(missing_cells(dir.file("partial.db"), suite).size(), 1u);
}

// Two inputs whose complete results of one cell ran different models under the name it gives
// (their fingerprints differ) are refused, nothing written; the same model, or an unknown one
// (a row stored before fingerprints), merges.
TEST_F(MergeTest, RefusesOneCellsResultsOfTwoModels) {
  run(small_suite(), dir.file("a.db"));
  run(small_suite(), dir.file("b.db"));
  exec(dir.file("a.db"), "UPDATE cells SET model_fingerprint = 'v1:aaaa'");
  exec(dir.file("b.db"), "UPDATE cells SET model_fingerprint = 'v1:aaaa'");
  EXPECT_EQ(merge_databases(dir.file("same.db"), {dir.file("a.db"), dir.file("b.db")}).cells, 3);
  exec(dir.file("b.db"), "UPDATE cells SET model_fingerprint = NULL");
  EXPECT_EQ(merge_databases(dir.file("unknown.db"), {dir.file("a.db"), dir.file("b.db")}).cells, 3);
  exec(dir.file("b.db"), "UPDATE cells SET model_fingerprint = 'v1:bbbb'");
  try {
    merge_databases(dir.file("two.db"), {dir.file("a.db"), dir.file("b.db")});
    ADD_FAILURE() << "merged two models' results";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hold results of one cell run with different models "
                                         "under the name it gives (v1:aaaa, v1:bbbb)"),
              std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("two.db")));
  // Also with a result of unknown model between them (the latest, so the one chosen).
  run(small_suite(), dir.file("c.db"));
  exec(dir.file("a.db"), "UPDATE cells SET finished_at = '2026-01-01T00:00:00Z'");
  exec(dir.file("b.db"), "UPDATE cells SET model_fingerprint = NULL, "
                         "finished_at = '2026-01-03T00:00:00Z'");
  exec(dir.file("c.db"), "UPDATE cells SET model_fingerprint = 'v1:cccc', "
                         "finished_at = '2026-01-02T00:00:00Z'");
  EXPECT_THROW(merge_databases(dir.file("three.db"), {dir.file("a.db"), dir.file("b.db"),
                                                      dir.file("c.db")}),
               InputError);
}

TEST_F(MergeTest, RefusesMixedSuitesAndSchemaVersionsWritingNothing) {
  run(small_suite(), dir.file("a.db"));
  json other = small_suite("other-suite");
  other["budgets"] = {32};
  run(other, dir.file("other.db"));
  try {
    merge_databases(dir.file("out.db"), {dir.file("a.db"), dir.file("other.db")});
    FAIL() << "merged two suites";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("different suites"), std::string::npos) << what;
    EXPECT_NE(what.find("other-suite"), std::string::npos) << what;
    EXPECT_NE(what.find("merge-test"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  // An existing output of another suite is refused as well, and left as it was.
  fs::copy_file(dir.file("other.db"), dir.file("existing.db"));
  EXPECT_THROW(merge_databases(dir.file("existing.db"), {dir.file("a.db")}), InputError);
  EXPECT_EQ(count(dir.file("existing.db"), "SELECT count(*) FROM cells"), 2);

  fs::copy_file(dir.file("a.db"), dir.file("v2.db"));
  exec(dir.file("a.db"), "PRAGMA wal_checkpoint(TRUNCATE)");
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(dir.file("v2.db").c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(h);
  }
  try {
    merge_databases(dir.file("out.db"), {dir.file("a.db"), dir.file("v2.db")});
    FAIL() << "merged two schema versions";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("different schema versions"), std::string::npos) << what;
    EXPECT_NE(what.find("v2.db"), std::string::npos) << what;
  }
  EXPECT_THROW(merge_databases(dir.file("out.db"), {dir.file("v2.db")}), InputError);
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  // merge --suite of another suite than the inputs hold: refused before anything is written.
  EXPECT_THROW(merge_databases(dir.file("out.db"), {dir.file("a.db")}, "other-suite"), InputError);
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  EXPECT_THROW(merge_databases(dir.file("out.db"), {dir.file("nope.db")}), InputError);
  std::ofstream(dir.file("junk.db")) << "not a database at all, just some text to fill a page";
  EXPECT_THROW(merge_databases(dir.file("out.db"), {dir.file("junk.db")}), InputError);
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".merging-"), std::string::npos) << entry.path();
}

TEST_F(MergeTest, CliMergeExitCodes) {
  run(small_suite(), dir.file("a.db"));
  json other = small_suite("other-suite");
  other["budgets"] = {32};
  run(other, dir.file("other.db"));
  const std::string kv = KVBENCH_BINARY;
  auto sh = [&](const std::string& args) {
    const int status = std::system(("cd " + dir.path() + " && " + kv + " " + args +
                                    " > cli.out 2> cli.err").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(sh("merge out.db a.db other.db"), 2);
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  EXPECT_EQ(sh("merge out.db a.db missing.db"), 2);
  EXPECT_EQ(sh("merge out.db a.db missing.db --skip-missing"), 0);
  EXPECT_TRUE(fs::exists(dir.file("out.db")));
}

}  // namespace
}  // namespace kvb
