#include "harness/store/result_store.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cctype>
#include <chrono>
#include <thread>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "engine/common/error.h"
#include "harness/store/sqlite_statement.h"

namespace kvb {
namespace {

// One column of a table: its name and its SQL definition.
struct Column {
  const char* name;
  const char* definition;
};

struct Table {
  const char* name;
  std::vector<Column> columns;  // in order
  const char* constraints;      // table constraints after the columns ("" for none)
};

// The schema, declared once: CREATE TABLE statements, the version-1 migration and the copies
// between databases (merge) are all made from these lists. Any change bumps
// ResultStore::kSchemaVersion. Ids are AUTOINCREMENT so a deleted run or cell id is never
// reused by a later row.
const Table kRuns = {
    "runs",
    {{"id", "INTEGER PRIMARY KEY AUTOINCREMENT"},
     {"suite", "TEXT NOT NULL"},
     {"suite_json", "TEXT NOT NULL"},
     {"command", "TEXT NOT NULL"},
     {"started_at", "TEXT NOT NULL"},
     {"finished_at", "TEXT"},
     {"status",
      "TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failures', 'interrupted'))"},
     {"git_commit", "TEXT"},
     {"build_type", "TEXT"},
     {"torch_version", "TEXT"},
     {"device", "TEXT"},
     {"threads", "INTEGER"},
     {"host", "TEXT"},
     {"warnings", "TEXT NOT NULL DEFAULT ''"},  // version 2
     // Version 4: the process running a 'running' run and its heartbeat (as a cell's claim).
     {"pid", "INTEGER"},
     {"heartbeat_at", "TEXT"}},
    ""};
const Table kCells = {
    "cells",
    {{"id", "INTEGER PRIMARY KEY AUTOINCREMENT"},
     {"run_id", "INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE"},
     {"config_json", "TEXT NOT NULL"},
     {"model", "TEXT NOT NULL"},
     {"dataset", "TEXT NOT NULL"},
     {"method", "TEXT NOT NULL"},
     {"budget", "INTEGER"},
     {"seed", "INTEGER NOT NULL"},
     {"status", "TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed'))"},
     {"error", "TEXT"},
     {"started_at", "TEXT NOT NULL"},
     {"finished_at", "TEXT"},
     {"elapsed_s", "REAL"},
     // Version 3: who runs a 'running' row (cells are claimed, not assumed).
     {"claim_host", "TEXT"},
     {"claim_pid", "INTEGER"},
     {"heartbeat_at", "TEXT"},
     // Version 5: checkpoint_fingerprint of the model the cell ran with ('': not a folder).
     {"model_fingerprint", "TEXT"}},
    ""};
const Table kSamples = {
    "samples",
    {{"cell_id", "INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE"},
     {"sample_id", "TEXT NOT NULL"},
     {"input_length", "INTEGER NOT NULL"},
     {"prediction", "TEXT NOT NULL"},
     {"answers_json", "TEXT NOT NULL"},
     {"score", "REAL NOT NULL"}},
    "PRIMARY KEY (cell_id, sample_id)"};
const Table kMetrics = {
    "metrics",
    {{"cell_id", "INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE"},
     {"sample_id", "TEXT"},
     {"name", "TEXT NOT NULL"},
     {"value", "REAL NOT NULL"},
     {"unit", "TEXT NOT NULL"}},
    ""};
const char* kIndexes =
    "CREATE INDEX cells_by_config ON cells(config_json);"
    "CREATE INDEX cells_by_run ON cells(run_id);"
    "CREATE INDEX metrics_by_cell ON metrics(cell_id);";

std::string create_table(const Table& t) {
  std::string sql = std::string("CREATE TABLE ") + t.name + " (";
  for (size_t i = 0; i < t.columns.size(); ++i)
    sql += std::string(i ? ", " : "") + t.columns[i].name + " " + t.columns[i].definition;
  if (*t.constraints) sql += std::string(", ") + t.constraints;
  return sql + ");";
}

std::string schema() {
  return "CREATE TABLE schema_version (version INTEGER NOT NULL);" + create_table(kRuns) +
         create_table(kCells) + create_table(kSamples) + create_table(kMetrics) + kIndexes;
}

const Column& column(const Table& t, const std::string& name) {
  for (const Column& c : t.columns)
    if (name == c.name) return c;
  throw std::logic_error(std::string("result store: no column ") + name + " in " + t.name);
}

// INSERT INTO main.<t> (every column) SELECT ?, ..., <the rest> FROM src.<t> WHERE <key> = ?:
// the first `bound` columns take new values (ids), the rest are copied; ORDER BY rowid keeps
// a cell's samples and metrics in their order.
std::string copy_rows(const Table& t, size_t bound, const char* key) {
  std::string names, values;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    names += std::string(i ? ", " : "") + t.columns[i].name;
    values += std::string(i ? ", " : "") + (i < bound ? "?" : t.columns[i].name);
  }
  return std::string("INSERT INTO main.") + t.name + " (" + names + ") SELECT " + values +
         " FROM src." + t.name + " WHERE " + key + " = ? ORDER BY rowid";
}

}  // namespace

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

namespace {

// `path` as a file: URI's path (RFC 3986: the characters a URI gives a meaning escaped).
std::string uri_path(const std::string& path) {
  std::string out;
  for (const unsigned char c : path) {
    if (std::isalnum(c) || std::strchr("/-._~", c)) {
      out += char(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A connection to `path`. write: the file created where absent. existing: the file must
// exist (read-only where this process may only read it; the caller writes nothing through it,
// and as a connection that may write, it removes the -wal and -shm files it opened on close).
// immutable: read-only without SQLite's shared memory file, for a WAL database in a folder
// this process cannot write (SQLite cannot read it otherwise); it does not see changes a
// writer has not yet checkpointed.
enum class Open { write, existing, immutable };

sqlite3* open_database(const std::string& path, Open mode) {
  sqlite3* db = nullptr;
  const int rc =
      mode == Open::immutable
          ? sqlite3_open_v2(("file:" + uri_path(path) + "?immutable=1").c_str(), &db,
                            SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr)
      : mode == Open::existing
          ? sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr)
          : sqlite3_open(path.c_str(), &db);
  if (rc != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw DatabaseError(path + ": cannot open database: " + message);
  }
  sqlite3_busy_timeout(db, 10000);
  return db;
}

}  // namespace

ResultStore::ResultStore(const std::string& path, Access access) : path_(path) {
  const bool reader = access == Access::read;
  if (!reader) {
    std::error_code error;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, error);
    if (error) throw DatabaseError(path + ": cannot create its folder: " + error.message());
  }
  db_ = open_database(path, reader ? Open::existing : Open::write);
  if (sqlite3_db_readonly(db_, "main") == 1) {  // a file this process may only read
    try {
      schema_version();
    } catch (const std::runtime_error&) {  // e.g. no -shm file it may create: read it as is
      sqlite3_close(db_);
      db_ = open_database(path, Open::immutable);
    }
  }
  try {
    // A read-only file is still read by show and report; writing to it is a DatabaseError
    // ("attempt to write a readonly database").
    // Before the journal mode changes: that rewrites the file's header.
    int64_t found = schema_version();
    if (found == 0) refuse_foreign_database();
    if (found > kSchemaVersion) throw newer_schema(found);
    // Nothing written: a reader, or a file this process may only read.
    const bool read_only = reader || sqlite3_db_readonly(db_, "main") == 1;
    if (read_only && found == 0)
      throw InputError(path + ": no kvbench schema in it (an empty SQLite database)");
    // A version-4 file is read as it is (show, report, check an archive): version 5 only added
    // cells.model_fingerprint, which show, report and check do not read (cell_complete reads
    // none there; merge takes version-5 inputs only). A reader migrates an older one in a copy
    // in memory; a writer that may not write it fails to migrate it (an InputError).
    if (reader && found < 4) copy_into_memory();
    if (!read_only) set_wal_mode();
    exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;");
    // Several processes may open a new or old database at once: creating and migrating
    // re-check the version inside their write transaction, so one does it, the others see it.
    if (found == 0) found = create_schema();
    if (found == 1) found = migrate_from_1();
    if (found == 2) found = migrate_from_2();
    if (found == 3) found = migrate_from_3();
    if (found == 4 && !read_only) found = migrate_from_4();
    has_fingerprints_ = found >= 5;
    if (found != kSchemaVersion && found != 4) throw newer_schema(found);
    if (reader) exec("PRAGMA query_only=1");  // the file's connection, or the copy in memory
  } catch (const std::runtime_error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    if (dynamic_cast<const InputError*>(&e)) throw;
    throw InputError(path + ": not a kvbench results database (" + e.what() + ")");
  }
}

InputError ResultStore::newer_schema(int64_t found) const {
  return InputError(path_ + ": schema_version is " + std::to_string(found) +
                    ", this kvbench reads version " + std::to_string(kSchemaVersion));
}

void ResultStore::copy_into_memory() {
  sqlite3* memory = open_database(":memory:", Open::write);
  sqlite3_backup* backup = sqlite3_backup_init(memory, "main", db_, "main");
  const int rc = backup ? sqlite3_backup_step(backup, -1) : sqlite3_errcode(memory);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    const std::string message = sqlite3_errmsg(memory);
    sqlite3_close(memory);
    throw DatabaseError(path_ + ": cannot read it into memory: " + message);
  }
  sqlite3_close(db_);
  db_ = memory;
}

ResultStore::~ResultStore() { sqlite3_close(db_); }

void require_results_database(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw InputError(path + ": no such database");
  if (S_ISDIR(st.st_mode)) throw InputError(path + ": a folder, not a results database");
  if (st.st_size == 0) throw InputError(path + ": empty file, not a kvbench results database");
}

void ResultStore::exec(const std::string& sql) const { exec_sql(db_, sql); }

void ResultStore::set_wal_mode() {
  // Changing the journal mode takes an exclusive lock and SQLite does not wait for it with the
  // busy handler: retry while another process holds the database (up to the busy timeout).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    try {
      exec("PRAGMA journal_mode=WAL");
      return;
    } catch (const std::runtime_error&) {
      const int code = sqlite3_errcode(db_) & 0xff;  // the failed statement's, still current
      const bool busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
      if (!busy || std::chrono::steady_clock::now() > give_up) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

int64_t ResultStore::schema_version() const {
  Statement has_version(db_,
      "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'");
  has_version.step();
  if (has_version.integer(0) == 0) return 0;  // a new file (or something else's database)
  Statement version(db_, "SELECT version FROM schema_version");
  return version.step() ? version.integer(0) : -1;
}

void ResultStore::in_transaction(const std::function<void()>& body) {
  exec("BEGIN IMMEDIATE");
  try {
    body();
    exec("COMMIT");
  } catch (...) {
    rollback(db_);
    throw;
  }
}

namespace {

// "name definition" of each named column of `table`, for ALTER TABLE ... ADD COLUMN.
std::vector<std::string> column_definitions(const Table& table,
                                            const std::vector<const char*>& names) {
  std::vector<std::string> out;
  for (const char* name : names)
    out.push_back(std::string(name) + " " + column(table, name).definition);
  return out;
}

}  // namespace

// Version 2 added runs.warnings, version 3 the claim of a running cell, version 4 the process
// of a running run: older databases gain the columns (empty) in place.
int64_t ResultStore::migrate_from_1() {
  return add_columns(1, kRuns.name, column_definitions(kRuns, {"warnings"}));
}
int64_t ResultStore::migrate_from_2() {
  return add_columns(2, kCells.name,
                     column_definitions(kCells, {"claim_host", "claim_pid", "heartbeat_at"}));
}
int64_t ResultStore::migrate_from_3() {
  return add_columns(3, kRuns.name, column_definitions(kRuns, {"pid", "heartbeat_at"}));
}

int64_t ResultStore::migrate_from_4() {
  return add_columns(4, kCells.name, column_definitions(kCells, {"model_fingerprint"}));
}

int64_t ResultStore::add_columns(int64_t from, const std::string& table,
                                 const std::vector<std::string>& columns) {
  int64_t version = 0;
  in_transaction([&] {
    version = schema_version();
    if (version != from) return;  // another process migrated it meanwhile
    for (const std::string& c : columns) exec("ALTER TABLE " + table + " ADD COLUMN " + c);
    version = from + 1;
    exec("UPDATE schema_version SET version = " + std::to_string(version));
  });
  return version;
}

void ResultStore::refuse_foreign_database() const {
  Statement tables(db_, "SELECT count(*) FROM sqlite_master");
  tables.step();
  if (tables.integer(0) > 0)  // some other program's database: never write to it
    throw InputError(path_ + ": an SQLite database of another program (it has tables but no "
                     "schema_version), not a kvbench results database");
}

int64_t ResultStore::create_schema() {
  int64_t version = 0;
  in_transaction([&] {
    version = schema_version();
    if (version != 0) return;  // another process created it meanwhile
    refuse_foreign_database();  // it may have appeared since the constructor's check
    exec(schema());
    exec("INSERT INTO schema_version VALUES (" + std::to_string(kSchemaVersion) + ")");
    version = kSchemaVersion;
  });
  return version;
}

namespace {

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Seconds since a row's heartbeat_at (a huge number when it has none), as SQL; `prefix`
// names its table in a join ("r.").
std::string age_of_heartbeat(const std::string& prefix = "") {
  return "coalesce((julianday('now') - julianday(" + prefix + "heartbeat_at)) * 86400.0, 1e18)";
}

// Whether the process that runs a row (a cell's claim, a run) still does. This process's own
// rows are leftovers of its earlier work; on this host a pid that no longer lives is gone
// (EPERM: it lives, under another user); elsewhere a heartbeat older than kClaimTimeoutS is.
bool process_alive(const std::string& host, int64_t pid, double heartbeat_age_s) {
  if (host != this_host()) return heartbeat_age_s < ResultStore::kClaimTimeoutS;
  return pid > 0 && pid != int64_t(getpid()) && (kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

// A run of `suite` still marked running: its id, whether its process lives, and where that is.
struct RunningRun {
  int64_t id = 0, pid = 0;
  std::string host;
  bool alive = false;
};
std::vector<RunningRun> running_runs(sqlite3* db, const std::string& suite) {
  Statement s(db, "SELECT id, coalesce(host, ''), coalesce(pid, 0), " +
                      age_of_heartbeat() +
                      " FROM runs WHERE suite = ? AND status = 'running'");
  s.bind(1, suite);
  std::vector<RunningRun> out;
  while (s.step()) {
    const std::string host = s.text(1);
    out.push_back({s.integer(0), s.integer(2), host, process_alive(host, s.integer(2), s.real(3))});
  }
  return out;
}

}  // namespace

int64_t ResultStore::begin_run(const RunInfo& r) {
  int64_t id = 0;
  in_transaction([&] {
    // A run of this suite still marked running whose process is gone was killed: say so. One
    // whose process lives runs beside this one (its cells' claims keep them apart).
    for (const RunningRun& run : running_runs(db_, r.suite))
      if (!run.alive) {
        Statement killed(db_, "UPDATE runs SET status = 'interrupted' WHERE id = ?");
        killed.bind(1, run.id).run();
      }
    Statement s(db_,
        "INSERT INTO runs (suite, suite_json, command, started_at, status, git_commit, "
        "build_type, torch_version, device, threads, host, pid, heartbeat_at) "
        "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)");
    const std::string now = utc_now();
    s.bind(1, r.suite).bind(2, r.suite_json).bind(3, r.command).bind(4, now)
        .bind(5, r.git_commit).bind(6, r.build_type).bind(7, r.torch_version).bind(8, r.device)
        .bind(9, int64_t(r.threads)).bind(10, r.host).bind(11, int64_t(getpid())).bind(12, now)
        .run();
    id = sqlite3_last_insert_rowid(db_);
  });
  return id;
}

void ResultStore::add_run_warning(int64_t run_id, const std::string& warning) {
  Statement s(db_, "UPDATE runs SET warnings = warnings || ? || char(10) WHERE id = ?");
  s.bind(1, warning).bind(2, run_id).run();
}

void ResultStore::finish_run(int64_t run_id, const std::string& status) {
  Statement s(db_, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?");
  s.bind(1, status).bind(2, utc_now()).bind(3, run_id).run();
}

int64_t ResultStore::forget_suite(const std::string& suite,
                                  const std::vector<std::string>& cell_keys) {
  int64_t others = 0;
  in_transaction([&] {
    // A run whose process lives would lose its cells under it, then fail on their claims.
    for (const RunningRun& run : running_runs(db_, suite))
      if (run.alive)
        throw InputError(path_ + ": run " + std::to_string(run.id) + " of suite " + suite +
                         " is still running (process " + std::to_string(run.pid) + " on " +
                         run.host + "); --fresh would delete its results under it: wait for it "
                         "or stop it");
    // Another suite's live run would lose from its tables the results it stored of these cells.
    for (const std::string& key : cell_keys) {
      Statement live(db_, "SELECT r.id, r.suite, coalesce(r.host, ''), coalesce(r.pid, 0), " +
                              age_of_heartbeat("r.") +
                              " FROM cells c JOIN runs r ON r.id = c.run_id WHERE "
                              "c.config_json = ? AND c.status != 'running' AND "
                              "r.status = 'running' AND r.suite != ?");
      live.bind(1, key).bind(2, suite);
      while (live.step())
        if (process_alive(live.text(2), live.integer(3), live.real(4)))
          throw InputError(path_ + ": run " + std::to_string(live.integer(0)) + " of suite " +
                           live.text(1) + " is still running (process " +
                           std::to_string(live.integer(3)) + " on " + live.text(2) +
                           ") and holds results of this suite's cells; --fresh would delete "
                           "them under it: wait for it or stop it");
    }
    Statement s(db_, "DELETE FROM runs WHERE suite = ?");
    s.bind(1, suite).run();
    // A running cell stays: its process finishes it, or a later claim takes it over.
    for (const std::string& key : cell_keys) {
      Statement other(db_, "DELETE FROM cells WHERE config_json = ? AND status != 'running'");
      other.bind(1, key).run();
      others += sqlite3_changes(db_);
    }
  });
  return others;
}

namespace {

// Whether a complete row's model (its fingerprint, NULL before version 5) may stand for the
// model of `fingerprint`: either is unknown, or they are equal.
bool same_model(const std::string& stored, const std::string& fingerprint) {
  return stored.empty() || fingerprint.empty() || stored == fingerprint;
}

}  // namespace

bool ResultStore::cell_complete(const std::string& config_json,
                                const std::string& model_fingerprint) const {
  Statement s(db_, std::string("SELECT ") +
                       (has_fingerprints_ ? "coalesce(model_fingerprint, '')" : "''") +
                       " FROM cells WHERE config_json = ? AND status = 'complete'");
  s.bind(1, config_json);
  while (s.step())
    if (same_model(s.text(0), model_fingerprint)) return true;
  return false;
}

CellClaim ResultStore::claim_cell(int64_t run_id, const std::string& config_json,
                              const std::string& model, const std::string& dataset,
                              const std::string& method, std::optional<int64_t> budget,
                              int64_t seed, const std::string& model_fingerprint) {
  CellClaim claim;
  in_transaction([&] {
    Statement rows(db_,
        "SELECT status, coalesce(claim_host, ''), coalesce(claim_pid, 0), " +
        age_of_heartbeat() + ", coalesce(model_fingerprint, '')"
        " FROM cells WHERE config_json = ? AND (status != 'failed' OR run_id = ?)");
    rows.bind(1, config_json).bind(2, run_id);
    while (rows.step()) {
      if (rows.text(0) == "complete") {
        // Another model's result (stored since the run checked: settle_changed_models) holds
        // the cell too: one key, one result.
        claim.other_model = !same_model(rows.text(4), model_fingerprint);
        claim.held_by = claim.other_model ? "complete, run with another model under that name"
                                          : "already complete";
        return;
      }
      if (rows.text(0) == "failed") {  // by a fellow worker of this run: not tried twice
        claim.held_by = "failed in this run";
        return;
      }
      if (process_alive(rows.text(1), rows.integer(2), rows.real(3))) {  // a running row
        claim.held_by = "running in " + rows.text(1) + " pid " + std::to_string(rows.integer(2));
        return;
      }
    }
    Statement drop(db_, "DELETE FROM cells WHERE config_json = ? AND status != 'complete'");
    drop.bind(1, config_json).run();
    Statement s(db_,
        "INSERT INTO cells (run_id, config_json, model, dataset, method, budget, seed, status, "
        "started_at, claim_host, claim_pid, heartbeat_at, model_fingerprint) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)");
    const std::string now = utc_now();
    s.bind(1, run_id).bind(2, config_json).bind(3, model).bind(4, dataset).bind(5, method)
        .bind(6, budget).bind(7, seed).bind(8, now).bind(9, this_host())
        .bind(10, int64_t(getpid())).bind(11, now).bind(12, model_fingerprint)
        .run();
    claim.cell_id = sqlite3_last_insert_rowid(db_);
  });
  return claim;
}

int64_t ResultStore::forget_other_models(
    const std::vector<std::pair<std::string, std::string>>& keys_and_fingerprints) {
  int64_t forgotten = 0;
  in_transaction([&] {
    forgotten = 0;
    for (const auto& [key, fingerprint] : keys_and_fingerprints) {
      if (fingerprint.empty()) continue;  // an unknown model is no other model
      Statement s(db_, "DELETE FROM cells WHERE config_json = ? AND status = 'complete' AND "
                       "coalesce(model_fingerprint, '') NOT IN ('', ?)");
      s.bind(1, key).bind(2, fingerprint).run();
      forgotten += sqlite3_changes(db_);
    }
  });
  return forgotten;
}

void ResultStore::heartbeat(int64_t run_id, int64_t cell_id) {
  in_transaction([&] {
    Statement run(db_, "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND status = 'running'");
    run.bind(1, utc_now()).bind(2, run_id).run();
    Statement cell(db_, "UPDATE cells SET heartbeat_at = ? WHERE id = ? AND status = 'running'");
    cell.bind(1, utc_now()).bind(2, cell_id).run();
  });
}

void ResultStore::complete_cell(int64_t cell_id, const std::vector<SampleRow>& samples,
                                const std::vector<MetricRow>& metrics, double elapsed_s) {
  exec("BEGIN IMMEDIATE");
  try {
    Statement ours(db_, "SELECT count(*) FROM cells WHERE id = ? AND status = 'running'");
    ours.bind(1, cell_id).step();
    if (ours.integer(0) == 0)
      throw std::runtime_error("the cell's claim was taken over by another process (its "
                               "heartbeat was older than " +
                               std::to_string(int(kClaimTimeoutS)) + " s)");
    for (const SampleRow& r : samples) {
      Statement s(db_, "INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?)");
      s.bind(1, cell_id).bind(2, r.sample_id).bind(3, r.input_length).bind(4, r.prediction)
          .bind(5, r.answers_json).bind(6, r.score).run();
    }
    for (const MetricRow& m : metrics) {
      Statement s(db_, "INSERT INTO metrics VALUES (?, ?, ?, ?, ?)");
      s.bind(1, cell_id).bind(2, m.sample_id).bind(3, m.name).bind(4, m.value).bind(5, m.unit).run();
    }
    Statement s(db_, "UPDATE cells SET status = 'complete', finished_at = ?, elapsed_s = ? "
                     "WHERE id = ?");
    s.bind(1, utc_now()).bind(2, elapsed_s).bind(3, cell_id).run();
    exec("COMMIT");
  } catch (...) {
    rollback(db_);
    throw;
  }
}

void ResultStore::fail_cell(int64_t cell_id, const std::string& error, double elapsed_s) {
  Statement s(db_, "UPDATE cells SET status = 'failed', error = ?, finished_at = ?, "
                   "elapsed_s = ? WHERE id = ?");
  s.bind(1, error).bind(2, utc_now()).bind(3, elapsed_s).bind(4, cell_id).run();
}

void ResultStore::release_cell(int64_t cell_id) {
  Statement s(db_, "DELETE FROM cells WHERE id = ? AND status = 'running'");
  s.bind(1, cell_id).run();
}

std::optional<int64_t> ResultStore::latest_run() const {
  Statement s(db_, "SELECT max(id) FROM runs");
  if (!s.step() || s.is_null(0)) return std::nullopt;
  return s.integer(0);
}

namespace {

constexpr const char* kCellColumns =
    "SELECT id, run_id, config_json, model, dataset, method, budget, seed, status, "
    "coalesce(error, ''), coalesce(elapsed_s, 0) FROM cells ";

std::vector<CellRow> read_cells(Statement& s) {
  std::vector<CellRow> rows;
  while (s.step()) {
    CellRow r;
    r.id = s.integer(0);
    r.run_id = s.integer(1);
    r.config_json = s.text(2);
    r.model = s.text(3);
    r.dataset = s.text(4);
    r.method = s.text(5);
    if (!s.is_null(6)) r.budget = s.integer(6);
    r.seed = s.integer(7);
    r.status = s.text(8);
    r.error = s.text(9);
    r.elapsed_s = s.real(10);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

std::vector<CellRow> ResultStore::cells_of_run(int64_t run_id) const {
  // A run's table shows every cell of its suite: those it ran and those it found complete.
  Statement s(db_, std::string(kCellColumns) +
                       "WHERE run_id IN (SELECT id FROM runs WHERE suite = "
                       "(SELECT suite FROM runs WHERE id = ?)) ORDER BY id");
  s.bind(1, run_id);
  return read_cells(s);
}

std::vector<CellRow> ResultStore::cells_with_config(const std::string& config_json) const {
  Statement s(db_, std::string(kCellColumns) + "WHERE config_json = ? ORDER BY id");
  s.bind(1, config_json);
  return read_cells(s);
}

std::vector<CellRow> ResultStore::all_cells() const {
  Statement s(db_, std::string(kCellColumns) + "ORDER BY id");
  return read_cells(s);
}

RunInfo ResultStore::run_info(int64_t run_id) const {
  Statement s(db_, "SELECT suite, suite_json, command, git_commit, build_type, torch_version, "
                   "device, host, threads FROM runs WHERE id = ?");
  s.bind(1, run_id);
  if (!s.step()) throw InputError(path_ + ": no run with id " + std::to_string(run_id));
  RunInfo info;
  info.suite = s.text(0);
  info.suite_json = s.text(1);
  info.command = s.text(2);
  info.git_commit = s.text(3);
  info.build_type = s.text(4);
  info.torch_version = s.text(5);
  info.device = s.text(6);
  info.host = s.text(7);
  info.threads = int(s.integer(8));
  return info;
}

void ResultStore::checkpoint() const { exec("PRAGMA wal_checkpoint(TRUNCATE)"); }

std::vector<MetricRow> ResultStore::cell_metrics(int64_t cell_id) const {
  Statement s(db_, "SELECT name, value, unit FROM metrics WHERE cell_id = ? AND sample_id IS NULL");
  s.bind(1, cell_id);
  std::vector<MetricRow> rows;
  while (s.step()) rows.push_back(MetricRow{std::nullopt, s.text(0), s.real(1), s.text(2)});
  return rows;
}

std::vector<SampleRow> ResultStore::cell_samples(int64_t cell_id) const {
  Statement s(db_, "SELECT sample_id, input_length, prediction, answers_json, score FROM samples "
                   "WHERE cell_id = ? ORDER BY rowid");
  s.bind(1, cell_id);
  std::vector<SampleRow> rows;
  while (s.step())
    rows.push_back(SampleRow{s.text(0), s.integer(1), s.text(2), s.text(3), s.real(4)});
  return rows;
}

std::map<std::string, double> ResultStore::sample_metric(int64_t cell_id,
                                                         const std::string& name) const {
  Statement s(db_, "SELECT sample_id, value FROM metrics WHERE cell_id = ? AND name = ? AND "
                   "sample_id IS NOT NULL");
  s.bind(1, cell_id).bind(2, name);
  std::map<std::string, double> values;
  while (s.step()) values[s.text(0)] = s.real(1);
  return values;
}

std::vector<std::pair<std::string, std::string>> ResultStore::run_fields(int64_t run_id) const {
  Statement s(db_, "SELECT suite, command, started_at, coalesce(finished_at, ''), status, "
                   "git_commit, build_type, torch_version, device, threads, host, warnings, "
                   "coalesce(pid, 0), " + age_of_heartbeat() +
                   " FROM runs WHERE id = ?");
  s.bind(1, run_id);
  if (!s.step()) throw InputError(path_ + ": no run with id " + std::to_string(run_id));
  const char* names[] = {"suite", "command", "started", "finished", "status", "git commit",
                         "build type", "LibTorch", "device", "threads", "host", "warnings"};
  std::vector<std::pair<std::string, std::string>> fields;
  for (int i = 0; i < 11; ++i) fields.emplace_back(names[i], s.text(i));
  // A run stopped by a signal stays 'running' until the suite's next run marks it: say so.
  if (fields[4].second == "running" && !process_alive(s.text(10), s.integer(12), s.real(13)))
    fields[4].second = "running, but its process is gone (interrupted)";
  // One line per warning; shown only when there are any.
  if (std::string w = s.text(11); !w.empty()) {
    while (!w.empty() && w.back() == '\n') w.pop_back();
    for (size_t pos; (pos = w.find('\n')) != std::string::npos;) w.replace(pos, 1, "; ");
    fields.emplace_back(names[11], w);
  }
  return fields;
}

std::string ResultStore::integrity_check() const {
  Statement s(db_, "PRAGMA integrity_check");
  return s.step() ? s.text(0) : "no answer";
}

// ---- SourceDatabase ----------------------------------------------------------------------------

namespace {

// A file: URI opening `path` read-only (the characters URIs reserve are escaped).
std::string readonly_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      static const char* hex = "0123456789ABCDEF";
      uri += '%';
      uri += hex[(unsigned char)c >> 4];
      uri += hex[(unsigned char)c & 15];
    } else {
      uri += c;
    }
  }
  return uri + "?mode=ro";
}

}  // namespace

SourceDatabase::SourceDatabase(ResultStore& into, const std::string& path)
    : db_(into.db_), path_(path) {
  Statement attach(db_, "ATTACH DATABASE ? AS src");
  attach.bind(1, readonly_uri(path));
  try {
    attach.run();
  } catch (const std::runtime_error& e) {
    throw InputError(path + ": cannot open database (" + e.what() + ")");
  }
}

SourceDatabase::~SourceDatabase() {
  sqlite3_exec(db_, "DETACH DATABASE src", nullptr, nullptr, nullptr);
}

SourceDatabase::Summary SourceDatabase::summary() const {
  Summary out;
  try {
    Statement has(db_, "SELECT count(*) FROM src.sqlite_master WHERE type = 'table' AND "
                       "name IN ('schema_version', 'runs', 'cells', 'samples', 'metrics')");
    has.step();
    if (has.integer(0) != 5) throw InputError(path_ + ": not a kvbench results database");
    Statement version(db_, "SELECT version FROM src.schema_version");
    out.schema_version = version.step() ? version.integer(0) : -1;
    Statement suites(db_, "SELECT DISTINCT suite FROM src.runs");
    while (suites.step()) out.suites.insert(suites.text(0));
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw InputError(path_ + ": not a kvbench results database (" + e.what() + ")");
  }
  return out;
}

std::vector<SourceDatabase::Run> SourceDatabase::runs() const {
  // The identity: what makes two rows the same run (one shard's run found in two inputs).
  Statement s(db_, "SELECT id, suite || char(31) || suite_json || char(31) || command || "
                   "char(31) || started_at || char(31) || coalesce(host, '') || char(31) || "
                   "coalesce(git_commit, '') || char(31) || coalesce(threads, ''), started_at, "
                   "coalesce(finished_at, ''), status FROM src.runs");
  std::vector<Run> out;
  while (s.step())
    out.push_back(Run{.id = s.integer(0), .identity = s.text(1), .started_at = s.text(2),
                      .finished_at = s.text(3), .status = s.text(4)});
  return out;
}

std::vector<SourceDatabase::Cell> SourceDatabase::cells() const {
  Statement s(db_, "SELECT id, run_id, config_json, status, coalesce(finished_at, started_at), "
                   "coalesce(model_fingerprint, '') FROM src.cells");
  std::vector<Cell> out;
  while (s.step())
    out.push_back(Cell{.id = s.integer(0), .run_id = s.integer(1), .config_json = s.text(2),
                       .status = s.text(3), .when = s.text(4), .model_fingerprint = s.text(5)});
  return out;
}

void SourceDatabase::copy_run(int64_t id, int64_t new_id) {
  Statement s(db_, copy_rows(kRuns, 1, "id"));
  s.bind(1, new_id).bind(2, id).run();
}

void SourceDatabase::copy_cell(int64_t id, int64_t new_id, int64_t new_run_id) {
  Statement cell(db_, copy_rows(kCells, 2, "id"));
  cell.bind(1, new_id).bind(2, new_run_id).bind(3, id).run();
  for (const Table* rows : {&kSamples, &kMetrics}) {
    Statement s(db_, copy_rows(*rows, 1, "cell_id"));
    s.bind(1, new_id).bind(2, id).run();
  }
}

}  // namespace kvb
