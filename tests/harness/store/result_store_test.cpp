// The SQLite result store: schema and version, the cell lifecycle (start, complete, fail),
// resume semantics (no duplicate rows per config), long-form samples and metrics.
#include "harness/store/result_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/common/error.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

// One integer from a query on `db`.
int64_t query_int(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  int64_t v = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

std::string query_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  std::string v;
  if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
    v = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  return v;
}

RunInfo run_info(const std::string& suite = "s") {
  RunInfo r;
  r.suite = suite;
  r.suite_json = "{\"name\":\"" + suite + "\"}";
  r.command = "kvbench run " + suite;
  r.git_commit = "abc";
  r.build_type = "Release";
  r.torch_version = "1.13";
  r.device = "cpu";
  r.host = "host";
  r.threads = 2;
  return r;
}

// The InputError message of opening `path`; fails the test when it opens.
std::string open_error(const std::string& path) {
  try {
    ResultStore store(path);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "opened " << path << " without an error";
  return "";
}

TEST(ResultStoreSchema, CreatedWithCurrentVersion) {
  test::TempDir dir;
  const std::string path = dir.file("sub/folder/r.db");  // folders are created
  {
    ResultStore store(path);
    EXPECT_EQ(query_int(store.handle(), "SELECT version FROM schema_version"), 5);
    EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM schema_version"), 1);
    for (const char* table : {"runs", "cells", "samples", "metrics"})
      EXPECT_EQ(query_int(store.handle(), std::string("SELECT count(*) FROM sqlite_master WHERE "
                                                      "type='table' AND name='") + table + "'"),
                1)
          << table;
    EXPECT_EQ(query_text(store.handle(), "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(query_int(store.handle(), "PRAGMA foreign_keys"), 1);
    EXPECT_EQ(store.integrity_check(), "ok");
    EXPECT_FALSE(store.latest_run().has_value());
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  // Reopening does not create the schema again.
  ResultStore again(path);
  EXPECT_EQ(query_int(again.handle(), "SELECT count(*) FROM schema_version"), 1);
}

TEST(ResultStoreSchema, OtherVersionIsInputError) {
  test::TempDir dir;
  const std::string path = dir.file("v99.db");
  {
    ResultStore store(path);
    ASSERT_EQ(sqlite3_exec(store.handle(), "UPDATE schema_version SET version = 99", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
  }
  const std::string m = open_error(path);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("schema_version is 99"), std::string::npos) << m;
}

// A version-5 database made a version-1 one: its columns since dropped, its version set.
const char* const kToVersionOne =
    "ALTER TABLE runs DROP COLUMN warnings; ALTER TABLE cells DROP COLUMN claim_host; "
    "ALTER TABLE cells DROP COLUMN claim_pid; ALTER TABLE cells DROP COLUMN heartbeat_at; "
    "ALTER TABLE runs DROP COLUMN pid; ALTER TABLE runs DROP COLUMN heartbeat_at; "
    "ALTER TABLE cells DROP COLUMN model_fingerprint; UPDATE schema_version SET version = 1";

// A version-1 database (no runs.warnings, no cell claims, no run processes, no model
// fingerprints) is upgraded in place when opened, through versions 2, 3 and 4 to 5; its runs
// keep their provenance and get no warnings.
TEST(ResultStoreSchema, VersionOneIsMigrated) {
  test::TempDir dir;
  const std::string path = dir.file("v1.db");
  int64_t run = 0;
  {
    ResultStore store(path);
    run = store.begin_run(RunInfo{"s", "{}", "kvbench run s", "abc", "Release", "1.13", "cpu", "h", 1});
    ASSERT_EQ(sqlite3_exec(store.handle(), kToVersionOne, nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ResultStore store(path);
  EXPECT_EQ(query_int(store.handle(), "SELECT version FROM schema_version"), 5);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM pragma_table_info('cells') WHERE "
                                      "name IN ('claim_host', 'claim_pid', 'heartbeat_at', "
                                      "'model_fingerprint')"),
            4);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM pragma_table_info('runs') WHERE "
                                      "name IN ('pid', 'heartbeat_at')"),
            2);
  EXPECT_EQ(query_text(store.handle(), "SELECT warnings FROM runs"), "");
  store.add_run_warning(run, "w1");
  store.add_run_warning(run, "w2");
  const auto fields = store.run_fields(run);
  EXPECT_EQ(fields.back(), (std::pair<std::string, std::string>{"warnings", "w1; w2"}));
  EXPECT_EQ(fields.front(), (std::pair<std::string, std::string>{"suite", "s"}));
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// show, report, check and baseline open the store for reading: `kvbench show` of an archived
// version-1 file migrated it and switched it to WAL, and a newer file was switched to WAL
// before it was refused. Read access leaves every byte as it was.
TEST(ResultStoreSchema, ReadingNeverWritesTheFile) {
  test::TempDir dir;
  const std::string old = dir.file("v1.db"), newer = dir.file("v9.db");
  for (const std::string& path : {old, newer}) {
    ResultStore store(path);
    store.begin_run(RunInfo{"s", "{}", "kvbench run s", "abc", "Release", "1.13", "cpu", "h", 1});
    const std::string edit = std::string(path == old ? kToVersionOne
                                                     : "UPDATE schema_version SET version = 9") +
                             "; ";
    ASSERT_EQ(sqlite3_exec(store.handle(), (edit + "PRAGMA journal_mode=DELETE").c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  const std::string old_bytes = file_bytes(old), newer_bytes = file_bytes(newer);
  {
    ResultStore store(old, ResultStore::Access::read);  // a migrated copy in memory
    EXPECT_EQ(store.run_info(1).suite, "s");
    EXPECT_EQ(store.run_fields(1).front(),
              (std::pair<std::string, std::string>{"suite", "s"}));
    EXPECT_THROW(store.add_run_warning(1, "w"), DatabaseError);  // the copy is read-only too
  }
  EXPECT_EQ(file_bytes(old), old_bytes);
  EXPECT_NE(open_error(newer).find("schema_version is 9"), std::string::npos);
  try {
    ResultStore store(newer, ResultStore::Access::read);
    ADD_FAILURE() << "a newer schema read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("schema_version is 9"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_bytes(newer), newer_bytes);
  EXPECT_FALSE(std::filesystem::exists(newer + "-wal"));
  // A current file read while nobody writes it: unchanged too, and never created.
  const std::string current = dir.file("v5.db");
  { ResultStore store(current); }
  const std::string current_bytes = file_bytes(current);
  { ResultStore store(current, ResultStore::Access::read); }
  EXPECT_EQ(file_bytes(current), current_bytes);
  EXPECT_FALSE(std::filesystem::exists(current + "-wal"));  // removed on close, as a writer's
  EXPECT_FALSE(std::filesystem::exists(current + "-shm"));
  EXPECT_THROW(ResultStore(dir.file("none.db"), ResultStore::Access::read), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.db")));
}

TEST(ResultStoreSchema, EmptyVersionTableIsInputError) {
  test::TempDir dir;
  const std::string path = dir.file("v.db");
  {
    ResultStore store(path);
    ASSERT_EQ(sqlite3_exec(store.handle(), "DELETE FROM schema_version", nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  EXPECT_NE(open_error(path).find("schema_version"), std::string::npos);
}

TEST(ResultStoreSchema, NonDatabaseFileIsInputError) {
  test::TempDir dir;
  const std::string path = dir.file("notes.db");
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "This is a text file, not an SQLite database.\n";
  }
  const std::string m = open_error(path);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("not a kvbench results database"), std::string::npos) << m;
  // The file was left as it was.
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "This is a text file, not an SQLite database.");
}

TEST(ResultStoreSchema, ForeignSqliteDatabaseIsInputError) {
  // An SQLite database of something else: no schema_version table but other tables, one
  // clashing with kvbench's (cells), one not (notes: kvbench's tables would fit beside it).
  for (const std::string table : {"cells (x INTEGER)", "notes (t TEXT)"}) {
    test::TempDir dir;
    const std::string path = dir.file("other.db");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, ("CREATE TABLE " + table).c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    try {
      ResultStore store(path);
      ADD_FAILURE() << "opened a database with a foreign table " << table;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    // Nothing of the kvbench schema was left in it, and its journal mode is its own (WAL
    // rewrites the header).
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* mode = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &mode, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(mode), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(mode, 0)), "delete");
    sqlite3_finalize(mode);
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'schema_version'"), 0);
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"), 1);
    sqlite3_close(db);
  }
}

class ResultStoreCells : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string path = dir.file("r.db");
  ResultStore store{path};

  // Run `run` as held by process `pid` of this host (0: none, a process that is gone).
  void run_held_by(int64_t run, int64_t pid) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    ASSERT_EQ(sqlite3_exec(store.handle(),
                           ("UPDATE runs SET host = '" + std::string(host) + "', pid = " +
                            std::to_string(pid) + " WHERE id = " + std::to_string(run)).c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }

  int64_t rows_of(const std::string& config) {
    return query_int(store.handle(),
                     "SELECT count(*) FROM cells WHERE config_json = '" + config + "'");
  }
};

TEST_F(ResultStoreCells, StartCompleteFail) {
  const int64_t run = store.begin_run(run_info());
  EXPECT_EQ(store.latest_run(), run);
  const int64_t a = store.claim_cell(run, "{\"a\":1}", "random-tiny", "passkey", "full",
                                     std::nullopt, 0).cell_id;
  const int64_t b = store.claim_cell(run, "{\"b\":1}", "random-tiny", "passkey", "streaming_llm",
                                     64, 3).cell_id;
  EXPECT_NE(a, b);
  EXPECT_FALSE(store.cell_complete("{\"a\":1}"));  // running is not complete
  store.complete_cell(a, {SampleRow{"s0", 100, "12345", "[\"12345\"]", 100.0}},
                      {MetricRow{std::nullopt, "score", 100.0, "passkey_accuracy"}}, 1.5);
  store.fail_cell(b, "budget 64 must exceed sinks 80", 0.25);
  EXPECT_TRUE(store.cell_complete("{\"a\":1}"));
  EXPECT_FALSE(store.cell_complete("{\"b\":1}"));
  EXPECT_FALSE(store.cell_complete("{\"never\":1}"));
  store.finish_run(run, "failures");

  const std::vector<CellRow> cells = store.cells_of_run(run);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].id, a);
  EXPECT_EQ(cells[0].run_id, run);
  EXPECT_EQ(cells[0].config_json, "{\"a\":1}");
  EXPECT_EQ(cells[0].model, "random-tiny");
  EXPECT_EQ(cells[0].dataset, "passkey");
  EXPECT_EQ(cells[0].method, "full");
  EXPECT_FALSE(cells[0].budget.has_value());
  EXPECT_EQ(cells[0].status, "complete");
  EXPECT_EQ(cells[0].error, "");
  EXPECT_DOUBLE_EQ(cells[0].elapsed_s, 1.5);
  EXPECT_EQ(cells[1].method, "streaming_llm");
  EXPECT_EQ(cells[1].budget, 64);
  EXPECT_EQ(cells[1].seed, 3);
  EXPECT_EQ(cells[1].status, "failed");
  EXPECT_EQ(cells[1].error, "budget 64 must exceed sinks 80");
  EXPECT_DOUBLE_EQ(cells[1].elapsed_s, 0.25);

  const auto fields = store.run_fields(run);
  auto field = [&](const std::string& name) {
    for (const auto& f : fields)
      if (f.first == name) return f.second;
    return std::string("<absent>");
  };
  EXPECT_EQ(field("suite"), "s");
  EXPECT_EQ(field("status"), "failures");
  EXPECT_EQ(field("git commit"), "abc");
  EXPECT_EQ(field("threads"), "2");
  EXPECT_NE(field("finished"), "");
  EXPECT_THROW(store.run_fields(run + 100), InputError);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(ResultStoreCells, RestartReplacesFailedAndRunningRows) {
  const int64_t run1 = store.begin_run(run_info());
  const std::string failed = "{\"cell\":\"failed\"}", running = "{\"cell\":\"running\"}";
  const int64_t f1 = store.claim_cell(run1, failed, "m", "d", "x", 8, 0).cell_id;
  store.fail_cell(f1, "boom", 0.1);
  const int64_t r1 = store.claim_cell(run1, running, "m", "d", "x", 16, 0).cell_id;  // never finished
  store.finish_run(run1, "interrupted");
  EXPECT_EQ(rows_of(failed), 1);
  EXPECT_EQ(rows_of(running), 1);

  const int64_t run2 = store.begin_run(run_info());
  const int64_t f2 = store.claim_cell(run2, failed, "m", "d", "x", 8, 0).cell_id;
  const int64_t r2 = store.claim_cell(run2, running, "m", "d", "x", 16, 0).cell_id;
  EXPECT_EQ(rows_of(failed), 1);
  EXPECT_EQ(rows_of(running), 1);
  EXPECT_NE(f2, f1);
  EXPECT_NE(r2, r1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM cells WHERE id IN (" +
                                          std::to_string(f1) + "," + std::to_string(r1) + ")"),
            0);
  EXPECT_EQ(query_text(store.handle(),
                       "SELECT status FROM cells WHERE id = " + std::to_string(f2)),
            "running");
  EXPECT_EQ(query_text(store.handle(),
                       "SELECT coalesce(error, '') FROM cells WHERE id = " + std::to_string(f2)),
            "");
  EXPECT_EQ(query_int(store.handle(), "SELECT run_id FROM cells WHERE id = " + std::to_string(f2)),
            run2);
  store.complete_cell(f2, {}, {}, 0.2);
  EXPECT_TRUE(store.cell_complete(failed));
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM cells"), 2);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(ResultStoreCells, FailedRowsOfAReplacedCellLeaveNoOrphans) {
  const int64_t run = store.begin_run(run_info());
  const std::string config = "{\"c\":1}";
  const int64_t first = store.claim_cell(run, config, "m", "d", "x", 8, 0).cell_id;
  store.fail_cell(first, "boom", 0.1);
  const int64_t rerun = store.begin_run(run_info());  // a failed cell is redone by a later run
  const int64_t second = store.claim_cell(rerun, config, "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(second, {SampleRow{"s0", 10, "p", "[]", 0}},
                      {MetricRow{std::string("s0"), "recall", 0.5, "ratio"}}, 0.3);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples"), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM metrics"), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples WHERE cell_id = " +
                                          std::to_string(second)),
            1);
  EXPECT_EQ(query_int(store.handle(), "PRAGMA foreign_key_check"), -1);  // no violations
}

// A complete row holds its cell for the model it ran with: for another model's fingerprint
// cell_complete is false but the row still holds the cell (claims say so) until
// forget_other_models deletes it (samples and all). An unknown fingerprint ("": no folder, or
// a row stored before schema version 5) matches any and is never forgotten as another's.
TEST_F(ResultStoreCells, ACompleteRowHoldsItsCellForItsOwnModel) {
  const int64_t run = store.begin_run(run_info());
  const std::string config = "{\"m\":1}";
  const int64_t first = store.claim_cell(run, config, "m", "d", "x", 8, 0, "v1:aaaa").cell_id;
  store.complete_cell(first, {SampleRow{"s0", 10, "p", "[]", 0}}, {}, 0.1);
  EXPECT_TRUE(store.cell_complete(config, "v1:aaaa"));
  EXPECT_TRUE(store.cell_complete(config, ""));
  EXPECT_TRUE(store.cell_complete(config));
  EXPECT_FALSE(store.cell_complete(config, "v1:bbbb"));
  EXPECT_EQ(store.claim_cell(run, config, "m", "d", "x", 8, 0, "v1:aaaa").held_by,
            "already complete");
  EXPECT_EQ(store.claim_cell(run, config, "m", "d", "x", 8, 0, "").held_by, "already complete");
  const int64_t rerun = store.begin_run(run_info());
  EXPECT_EQ(store.claim_cell(rerun, config, "m", "d", "x", 8, 0, "v1:bbbb").held_by,
            "complete, run with another model under that name");

  EXPECT_EQ(store.forget_other_models({{config, "v1:aaaa"}, {config, ""}}), 0);
  EXPECT_EQ(store.forget_other_models({{config, "v1:bbbb"}}), 1);
  EXPECT_EQ(rows_of(config), 0);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples"), 0);
  const int64_t second = store.claim_cell(rerun, config, "m", "d", "x", 8, 0, "v1:bbbb").cell_id;
  ASSERT_GT(second, 0);
  store.complete_cell(second, {SampleRow{"s0", 10, "q", "[]", 1}}, {}, 0.1);
  EXPECT_FALSE(store.cell_complete(config, "v1:aaaa"));
  EXPECT_TRUE(store.cell_complete(config, "v1:bbbb"));

  // A row of unknown model stands for any, and is not forgotten.
  const std::string old = "{\"m\":2}";
  const int64_t unknown = store.claim_cell(run, old, "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(unknown, {}, {}, 0.1);
  EXPECT_TRUE(store.cell_complete(old, "v1:cccc"));
  EXPECT_EQ(store.forget_other_models({{old, "v1:cccc"}}), 0);
}

TEST_F(ResultStoreCells, SamplesAndMetricsRoundTrip) {
  const int64_t run = store.begin_run(run_info());
  const int64_t cell = store.claim_cell(run, "{}", "m", "d", "x", 32, 1).cell_id;
  const std::vector<SampleRow> samples = {
      SampleRow{"passkey-0", 128, "The pass key is 12345", "[\"12345\"]", 100.0},
      SampleRow{"passkey-1", 130, "quote ' and unicode \xc3\xa9", "[\"54321\"]", 0.0}};
  const std::vector<MetricRow> metrics = {
      MetricRow{std::nullopt, "score", 50.0, "passkey_accuracy"},
      MetricRow{std::nullopt, "decode_ms_per_token", 1.25, "ms"},
      MetricRow{std::string("passkey-0"), "recall", 0.75, "ratio"}};
  store.complete_cell(cell, samples, metrics, 2.0);

  const std::vector<SampleRow> got = store.cell_samples(cell);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sample_id, samples[i].sample_id);
    EXPECT_EQ(got[i].input_length, samples[i].input_length);
    EXPECT_EQ(got[i].prediction, samples[i].prediction);
    EXPECT_EQ(got[i].answers_json, samples[i].answers_json);
    EXPECT_DOUBLE_EQ(got[i].score, samples[i].score);
  }
  // cell_metrics returns the cell-level ones only; the per-sample row is in the table.
  const std::vector<MetricRow> cell_level = store.cell_metrics(cell);
  ASSERT_EQ(cell_level.size(), 2u);
  EXPECT_EQ(cell_level[0].name, "score");
  EXPECT_DOUBLE_EQ(cell_level[0].value, 50.0);
  EXPECT_EQ(cell_level[0].unit, "passkey_accuracy");
  EXPECT_FALSE(cell_level[0].sample_id.has_value());
  EXPECT_EQ(cell_level[1].name, "decode_ms_per_token");
  EXPECT_DOUBLE_EQ(cell_level[1].value, 1.25);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM metrics WHERE sample_id = "
                                      "'passkey-0' AND name = 'recall'"),
            1);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(ResultStoreCells, CompleteCellIsOneTransaction) {
  const int64_t run = store.begin_run(run_info());
  const int64_t cell = store.claim_cell(run, "{\"t\":1}", "m", "d", "x", 32, 0).cell_id;
  // The second sample repeats the first's id: the primary key fails midway, and nothing of
  // the cell may be left behind.
  const std::vector<SampleRow> samples = {SampleRow{"dup", 1, "a", "[]", 0},
                                          SampleRow{"dup", 1, "b", "[]", 0}};
  EXPECT_ANY_THROW(store.complete_cell(cell, samples, {MetricRow{std::nullopt, "score", 1, "x"}}, 1));
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples"), 0);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM metrics"), 0);
  EXPECT_FALSE(store.cell_complete("{\"t\":1}"));
  EXPECT_EQ(query_text(store.handle(), "SELECT status FROM cells WHERE id = " +
                                           std::to_string(cell)),
            "running");
  // The store is still usable afterwards (no transaction left open).
  store.fail_cell(cell, "duplicate sample", 1);
  EXPECT_EQ(store.cells_of_run(run).at(0).status, "failed");
  EXPECT_TRUE(sqlite3_get_autocommit(store.handle()));
}

TEST_F(ResultStoreCells, ForgetSuiteDeletesItsRunsAndCells) {
  const int64_t keep_run = store.begin_run(run_info("other"));
  const int64_t keep = store.claim_cell(keep_run, "{\"k\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(keep, {SampleRow{"s", 1, "p", "[]", 0}}, {}, 0);
  const int64_t run = store.begin_run(run_info("s"));
  const int64_t gone = store.claim_cell(run, "{\"g\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(gone, {SampleRow{"s", 1, "p", "[]", 0}},
                      {MetricRow{std::nullopt, "score", 1, "x"}}, 0);
  store.finish_run(run, "complete");  // (a running run of a live process is not forgotten)
  store.forget_suite("s", {});
  EXPECT_FALSE(store.cell_complete("{\"g\":1}"));
  EXPECT_TRUE(store.cell_complete("{\"k\":1}"));
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples"), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM metrics"), 0);
  EXPECT_EQ(store.integrity_check(), "ok");
}

// A cell of the suite that another suite's run completed would be skipped, not redone, by a
// --fresh run: forgetting the suite forgets that result too (a running one stays with its
// process), and says how many went.
TEST_F(ResultStoreCells, ForgetSuiteForgetsOtherSuitesResultsOfItsCells) {
  const int64_t other = store.begin_run(run_info("other"));
  const int64_t shared = store.claim_cell(other, "{\"shared\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(shared, {SampleRow{"s", 1, "p", "[]", 0}}, {}, 0);
  store.claim_cell(other, "{\"running\":1}", "m", "d", "x", 8, 0);
  const int64_t own = store.claim_cell(other, "{\"own\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(own, {}, {}, 0);
  store.finish_run(other, "interrupted");  // a live one keeps its results (the test below)
  EXPECT_EQ(store.forget_suite("s", {"{\"shared\":1}", "{\"running\":1}", "{\"absent\":1}"}), 1);
  EXPECT_FALSE(store.cell_complete("{\"shared\":1}"));
  EXPECT_TRUE(store.cell_complete("{\"own\":1}"));
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM cells WHERE status = 'running'"), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples"), 0);
  EXPECT_EQ(store.integrity_check(), "ok");
}

// --fresh while another process runs the suite would delete its cells under it: refused, with
// nothing deleted; once that process is gone, allowed.
TEST_F(ResultStoreCells, ForgetSuiteRefusesWhileAnotherProcessRunsIt) {
  const int64_t run = store.begin_run(run_info("s"));
  const int64_t cell = store.claim_cell(run, "{\"g\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(cell, {}, {}, 0);
  const auto held_by = [&](int64_t pid) { run_held_by(run, pid); };
  held_by(int64_t(getppid()));  // a process that lives: the test's parent
  try {
    store.forget_suite("s", {});
    ADD_FAILURE() << "forgot a suite another process runs";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is still running (process " +
                                         std::to_string(getppid())), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(store.cell_complete("{\"g\":1}"));
  EXPECT_TRUE(sqlite3_get_autocommit(store.handle()));
  const auto status = [&] {
    for (const auto& [name, value] : store.run_fields(run))
      if (name == "status") return value;
    return std::string("<absent>");
  };
  EXPECT_EQ(status(), "running");
  held_by(0);  // no process: `show` says the run was interrupted
  EXPECT_EQ(status(), "running, but its process is gone (interrupted)");
  store.forget_suite("s", {});
  EXPECT_FALSE(store.cell_complete("{\"g\":1}"));
}

// --fresh also forgets another suite's results of its cells, but not from under that suite's
// run while its process lives.
TEST_F(ResultStoreCells, ForgetSuiteLeavesAnotherSuitesLiveRunItsResults) {
  const int64_t other = store.begin_run(run_info("other"));
  const int64_t cell = store.claim_cell(other, "{\"h\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(cell, {}, {}, 0);
  const auto held_by = [&](int64_t pid) { run_held_by(other, pid); };
  held_by(int64_t(getppid()));  // a process that lives
  try {
    store.forget_suite("s", {"{\"h\":1}"});
    ADD_FAILURE() << "forgot the results of another suite's live run";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run " + std::to_string(other) + " of suite other is "
                                         "still running"),
              std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.cell_complete("{\"h\":1}"));
  held_by(0);  // its process is gone
  EXPECT_EQ(store.forget_suite("s", {"{\"h\":1}"}), 1);
  EXPECT_FALSE(store.cell_complete("{\"h\":1}"));
}

TEST_F(ResultStoreCells, CellsOfRunShowTheWholeSuite) {
  // A resumed run's table lists the cells it found complete as well as those it ran.
  const int64_t run1 = store.begin_run(run_info("s"));
  const int64_t c1 = store.claim_cell(run1, "{\"1\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(c1, {}, {}, 0);
  const int64_t run2 = store.begin_run(run_info("s"));
  const int64_t c2 = store.claim_cell(run2, "{\"2\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(c2, {}, {}, 0);
  const int64_t other = store.begin_run(run_info("t"));
  store.claim_cell(other, "{\"3\":1}", "m", "d", "x", 8, 0).cell_id;
  EXPECT_EQ(store.cells_of_run(run2).size(), 2u);
  EXPECT_EQ(store.cells_of_run(other).size(), 1u);
  EXPECT_EQ(store.latest_run(), other);
}

TEST_F(ResultStoreCells, DataSurvivesReopen) {
  const int64_t run = store.begin_run(run_info());
  const int64_t cell = store.claim_cell(run, "{\"p\":1}", "m", "d", "x", 8, 0).cell_id;
  store.complete_cell(cell, {SampleRow{"s", 1, "p", "[]", 50}}, {}, 0);
  ResultStore second(path);  // a second connection sees the committed cell
  EXPECT_TRUE(second.cell_complete("{\"p\":1}"));
  EXPECT_EQ(second.cell_samples(cell).size(), 1u);
  EXPECT_EQ(second.integrity_check(), "ok");
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

// SourceDatabase: another database read through a store's connection and copied into it.
TEST(ResultStoreSource, CopiesARunAndACellWithItsSamplesAndMetricsUnderNewIds) {
  test::TempDir dir;
  int64_t cell = 0;
  {
    ResultStore source(dir.file("in.db"));
    const int64_t run = source.begin_run(run_info("s"));
    source.claim_cell(run, "{\"a\":1}", "m", "d", "full", std::nullopt, 0).cell_id;  // failed below
    cell = source.claim_cell(run, "{\"a\":2}", "m", "d", "full", int64_t(64), 3).cell_id;
    source.complete_cell(cell,
                         {SampleRow{.sample_id = "x", .input_length = 5, .prediction = "p",
                                    .answers_json = "[]", .score = 1.0},
                          SampleRow{.sample_id = "w", .input_length = 6, .prediction = "q",
                                    .answers_json = "[]", .score = 0.0}},
                         {MetricRow{.sample_id = std::nullopt, .name = "m1", .value = 2.0,
                                    .unit = "u"}},
                         1.5);
    source.finish_run(run, "complete");
  }
  ResultStore out(dir.file("out.db"));
  SourceDatabase src(out, dir.file("in.db"));
  const SourceDatabase::Summary summary = src.summary();
  EXPECT_EQ(summary.schema_version, ResultStore::kSchemaVersion);
  EXPECT_EQ(summary.suites, std::set<std::string>{"s"});
  ASSERT_EQ(src.runs().size(), 1u);
  ASSERT_EQ(src.cells().size(), 2u);
  EXPECT_EQ(src.cells()[1].config_json, "{\"a\":2}");
  EXPECT_EQ(src.cells()[1].status, "complete");
  out.in_transaction([&] {
    src.copy_run(src.runs()[0].id, 7);
    src.copy_cell(cell, 40, 7);
  });
  const std::vector<CellRow> cells = out.all_cells();
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].id, 40);
  EXPECT_EQ(cells[0].run_id, 7);
  EXPECT_EQ(cells[0].budget, std::optional<int64_t>(64));
  EXPECT_EQ(cells[0].seed, 3);
  EXPECT_DOUBLE_EQ(cells[0].elapsed_s, 1.5);
  const std::vector<SampleRow> samples = out.cell_samples(40);
  ASSERT_EQ(samples.size(), 2u);  // in their order
  EXPECT_EQ(samples[0].sample_id, "x");
  EXPECT_EQ(samples[1].sample_id, "w");
  ASSERT_EQ(out.cell_metrics(40).size(), 1u);
  EXPECT_EQ(out.cell_metrics(40)[0].name, "m1");
  EXPECT_EQ(out.run_info(7).git_commit, "abc");
}

TEST(ResultStoreSource, RefusesWhatIsNotAKvbenchDatabase) {
  test::TempDir dir;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.file("other.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE cells (x INTEGER)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  ResultStore out(dir.file("out.db"));
  try {
    SourceDatabase(out, dir.file("other.db")).summary();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("other.db") + ": not a kvbench results database");
  }
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

// Claims (schema 3): a running row is its process's while that process lives.
class ResultStoreClaims : public ::testing::Test {
 protected:
  test::TempDir dir;
  ResultStore store{dir.file("claims.db")};
  const int64_t run = store.begin_run(run_info());
  const std::string config = "{\"claim\":1}";

  CellClaim claim() { return store.claim_cell(run, config, "m", "d", "x", 8, 0); }
  // Makes the config's running row look held by `host` / `pid`, heartbeat `age_s` ago.
  void hold(const std::string& host, int64_t pid, int age_s) {
    ASSERT_EQ(sqlite3_exec(store.handle(),
                           ("UPDATE cells SET claim_host = '" + host + "', claim_pid = " +
                            std::to_string(pid) + ", heartbeat_at = strftime('%Y-%m-%dT%H:%M:%SZ', "
                            "'now', '-" + std::to_string(age_s) + " seconds') WHERE status = "
                            "'running'").c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  std::string host() {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    return name;
  }
};

TEST_F(ResultStoreClaims, ALiveProcessOfThisHostKeepsItsCell) {
  ASSERT_GT(claim().cell_id, 0);
  hold(host(), int64_t(getppid()), 0);  // the parent process: alive
  const CellClaim second = claim();
  EXPECT_EQ(second.cell_id, 0);
  EXPECT_EQ(second.held_by, "running in " + host() + " pid " + std::to_string(getppid()));
}

TEST_F(ResultStoreClaims, ADeadProcessOfThisHostLosesItsCell) {
  const int64_t first = claim().cell_id;
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // its pid now names no process
  hold(host(), int64_t(child), 0);
  const CellClaim second = claim();
  ASSERT_GT(second.cell_id, 0);
  EXPECT_NE(second.cell_id, first);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM cells"), 1);  // replaced, not added
}

TEST_F(ResultStoreClaims, AnotherHostHoldsItsCellUntilItsHeartbeatIsStale) {
  ASSERT_GT(claim().cell_id, 0);
  hold("elsewhere", 1, 10);
  EXPECT_EQ(claim().held_by, "running in elsewhere pid 1");
  hold("elsewhere", 1, int(ResultStore::kClaimTimeoutS) + 60);
  EXPECT_GT(claim().cell_id, 0);
}

TEST_F(ResultStoreClaims, HeartbeatRenewsAndACompleteCellIsNotClaimed) {
  const int64_t id = claim().cell_id;
  hold("elsewhere", 1, int(ResultStore::kClaimTimeoutS) + 60);
  store.heartbeat(run, id);  // fresh again: another host's claim holds
  EXPECT_EQ(claim().cell_id, 0);
  hold(host(), int64_t(getpid()), 0);  // back to ours
  store.complete_cell(id, {}, {}, 0.1);
  EXPECT_EQ(claim().held_by, "already complete");
}

TEST_F(ResultStoreClaims, CompletingACellTakenOverFails) {
  const int64_t id = claim().cell_id;
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  hold(host(), int64_t(child), 0);
  ASSERT_GT(claim().cell_id, 0);  // taken over
  EXPECT_THROW(store.complete_cell(id, {}, {}, 0.1), std::runtime_error);
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

class ResultStoreRuns : public ResultStoreClaims {
 protected:
  // Makes run `id` look run by `host` / `pid`, heartbeat `age_s` ago.
  void run_by(int64_t id, const std::string& host, int64_t pid, int age_s) {
    ASSERT_EQ(sqlite3_exec(store.handle(),
                           ("UPDATE runs SET host = '" + host + "', pid = " + std::to_string(pid) +
                            ", heartbeat_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-" +
                            std::to_string(age_s) + " seconds') WHERE id = " +
                            std::to_string(id)).c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  std::string status_of(int64_t id) {
    return query_text(store.handle(), "SELECT status FROM runs WHERE id = " + std::to_string(id));
  }
};

// A new run marks interrupted only the runs whose process is gone; one running beside it
// (another live process of this host, another host with a fresh heartbeat) stays running.
TEST_F(ResultStoreRuns, BeginningARunInterruptsOnlyRunsWhoseProcessIsGone) {
  const int64_t live_here = run;
  run_by(live_here, host(), int64_t(getppid()), 0);
  const int64_t live_elsewhere = store.begin_run(run_info());
  run_by(live_elsewhere, "elsewhere", 1, 10);
  const int64_t stale_elsewhere = store.begin_run(run_info());
  run_by(stale_elsewhere, "elsewhere", 1, int(ResultStore::kClaimTimeoutS) + 60);
  const int64_t dead_here = store.begin_run(run_info());
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  run_by(dead_here, host(), int64_t(child), 0);
  const int64_t other_suite = store.begin_run(run_info("other"));
  run_by(other_suite, host(), int64_t(child), 0);

  const int64_t next = store.begin_run(run_info());
  EXPECT_EQ(status_of(live_here), "running");
  EXPECT_EQ(status_of(live_elsewhere), "running");
  EXPECT_EQ(status_of(stale_elsewhere), "interrupted");
  EXPECT_EQ(status_of(dead_here), "interrupted");
  EXPECT_EQ(status_of(other_suite), "running");  // another suite's runs are not looked at
  EXPECT_EQ(status_of(next), "running");
  EXPECT_EQ(query_int(store.handle(), "SELECT pid FROM runs WHERE id = " + std::to_string(next)),
            int64_t(getpid()));
}

// Workers of one run share it: a cell one of them failed is not tried again in that run (a
// later run tries it again).
TEST_F(ResultStoreRuns, ACellFailedInThisRunIsNotClaimedAgainInIt) {
  const int64_t id = claim().cell_id;
  store.fail_cell(id, "boom", 0.1);
  EXPECT_EQ(claim().held_by, "failed in this run");
  const int64_t later = store.begin_run(run_info());
  EXPECT_GT(store.claim_cell(later, config, "m", "d", "x", 8, 0).cell_id, 0);
}

TEST_F(ResultStoreRuns, HeartbeatRenewsTheRun) {
  run_by(run, "elsewhere", 1, int(ResultStore::kClaimTimeoutS) + 60);
  store.heartbeat(run, 0);
  store.begin_run(run_info());
  EXPECT_EQ(status_of(run), "running");
}

// The database file's own failures are DatabaseErrors (exit 2) naming the file.
TEST(ResultStoreFaults, AFolderThatCannotBeCreatedNamesTheFile) {
  test::TempDir dir;
  std::ofstream(dir.file("plain")) << "a file, not a folder";
  const std::string path = dir.file("plain/results.db");
  try {
    ResultStore store(path);
    ADD_FAILURE() << "no error";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot create its folder", 0), 0u)
        << e.what();
  }
}

TEST(ResultStoreFaults, WritingAReadOnlyConnectionIsADatabaseError) {
  test::TempDir dir;
  const std::string path = dir.file("r.db");
  { ResultStore create(path); }
  ResultStore store(path);
  // What SQLite does with a file this process may only read: the connection is read-only.
  ASSERT_EQ(sqlite3_exec(store.handle(), "PRAGMA query_only = 1", nullptr, nullptr, nullptr),
            SQLITE_OK);
  try {
    store.begin_run(run_info());
    ADD_FAILURE() << "no error";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  EXPECT_FALSE(store.latest_run().has_value());  // nothing half-written
}

}  // namespace
}  // namespace kvb
