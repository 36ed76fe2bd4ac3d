// The SQLite result store: schema defined here once and versioned; WAL mode; each cell is
// committed in one transaction. Metrics are long-form rows, so a new metric needs no migration.
#pragma once
#include <sqlite3.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/store/database_error.h"

namespace kvb {

struct RunInfo {
  std::string suite;
  std::string suite_json;
  std::string command;
  std::string git_commit, build_type, torch_version, device, host;
  int threads = 0;
};

struct SampleRow {
  std::string sample_id;
  int64_t input_length = 0;
  std::string prediction;
  std::string answers_json;
  double score = 0;
};

struct MetricRow {
  std::optional<std::string> sample_id;  // none: a cell-level metric
  std::string name;
  double value = 0;
  std::string unit;
};

// The outcome of claiming a cell: ours to run (cell_id > 0), or held by someone else.
struct CellClaim {
  int64_t cell_id = 0;
  bool other_model = false;  // held by a complete result of another model (held_by says so)
  // When not ours: "already complete", "running in <host> pid <pid>", "failed in this run".
  std::string held_by;
};

struct CellRow {
  int64_t id = 0, run_id = 0;
  std::string config_json, model, dataset, method, status, error;
  std::optional<int64_t> budget;
  int64_t seed = 0;
  double elapsed_s = 0;
};

// For commands that only read a database (show, report, baseline, check): an InputError
// naming `path` where it is missing, a folder or empty (opening would create the schema in it).
void require_results_database(const std::string& path);

class ResultStore {
 public:
  // 2: runs.warnings; 3: cells' claims; 4: runs' processes; 5: cells.model_fingerprint
  static constexpr int kSchemaVersion = 5;
  // A running cell (run) of another host whose heartbeat is older than this is taken over
  // (marked interrupted).
  static constexpr double kClaimTimeoutS = 300;
  // How often a running cell's and run's heartbeat is renewed (the runner's heartbeat thread).
  static constexpr double kHeartbeatS = 30;

  // Opens (creating the file, its folder and the schema on first use). A database with another
  // schema version is an InputError.
  // Access::read (show, report, check, baseline): the file is never written, nor created,
  // switched to WAL or migrated, and no -wal or -shm file is left beside it; a file of an older
  // schema is read from a migrated copy in memory. Writing through such a store is a
  // DatabaseError (query_only).
  enum class Access { write, read };
  explicit ResultStore(const std::string& path, Access access = Access::write);
  ~ResultStore();
  ResultStore(const ResultStore&) = delete;
  ResultStore& operator=(const ResultStore&) = delete;

  // A new 'running' run of this process; first marks 'interrupted' the suite's running runs
  // whose process is gone (the liveness rule of claim_cell).
  int64_t begin_run(const RunInfo& info);
  void finish_run(int64_t run_id, const std::string& status);
  // Appends one line to the run's warnings (provenance: what the run let through).
  void add_run_warning(int64_t run_id, const std::string& warning);
  // Deletes every run and cell of `suite` and any other suite's finished cell under one of
  // `cell_keys` (the suite's cells: a run would skip it, so --fresh would not redo it); an
  // InputError, deleting nothing, while a run of it, or a run of another suite holding such a
  // cell, is still running in a process that lives (claim_cell's liveness rule). Returns how many of those other suites' cells went.
  int64_t forget_suite(const std::string& suite, const std::vector<std::string>& cell_keys);

  // Whether a complete row holds the cell of `config_json`, run with the model of
  // `model_fingerprint` (checkpoint_fingerprint): the row's is that one, or either is unknown
  // ("", or a row stored before schema version 5), so "" asks for any complete row.
  bool cell_complete(const std::string& config_json, const std::string& model_fingerprint = "") const;
  const std::string& path() const { return path_; }
  // Claims the cell of `config_json` for this process, in one transaction: unless a complete
  // row exists, a live process runs it (this host: its pid lives; another host: its
  // heartbeat is younger than kClaimTimeoutS) or it failed in run `run_id` (a fellow worker's
  // failure), replaces any failed or abandoned row with a "running" row claimed by this host
  // and pid. Several processes on one database thus never
  // run one cell at once, and an abandoned cell (a killed worker's) is redone. A complete row
  // of another model (cell_complete's rule on `model_fingerprint`) holds the cell too, with
  // its own `held_by`: the runner refuses such cells before it begins (settle_changed_models).
  CellClaim claim_cell(int64_t run_id, const std::string& config_json, const std::string& model,
                   const std::string& dataset, const std::string& method,
                   std::optional<int64_t> budget, int64_t seed,
                   const std::string& model_fingerprint = "");
  // Deletes, under each key, the complete rows of another model than its fingerprint (both
  // known and different; samples and metrics with them), in one transaction. Returns how many.
  int64_t forget_other_models(
      const std::vector<std::pair<std::string, std::string>>& keys_and_fingerprints);
  // Renews the heartbeat of a running run and of its running cell (0: none), from any
  // connection to the database.
  void heartbeat(int64_t run_id, int64_t cell_id);
  // One transaction: samples, metrics, status "complete"; std::runtime_error when the cell is
  // no longer this process's running row (taken over).
  void complete_cell(int64_t cell_id, const std::vector<SampleRow>& samples,
                     const std::vector<MetricRow>& metrics, double elapsed_s);
  void fail_cell(int64_t cell_id, const std::string& error, double elapsed_s);
  // Gives up this process's claim of a running cell (a stopped run): the row goes, and the
  // next run claims the cell afresh.
  void release_cell(int64_t cell_id);

  // Queries for `show` and reports.
  std::optional<int64_t> latest_run() const;
  std::vector<CellRow> cells_of_run(int64_t run_id) const;
  std::vector<CellRow> all_cells() const;  // every cell of the database, by id
  // The rows stored under one normalised config (any run, any suite), by id.
  std::vector<CellRow> cells_with_config(const std::string& config_json) const;
  // The provenance a run was begun with (RunInfo's fields); InputError for no such run.
  RunInfo run_info(int64_t run_id) const;
  std::vector<MetricRow> cell_metrics(int64_t cell_id) const;  // cell-level only
  std::vector<SampleRow> cell_samples(int64_t cell_id) const;
  // sample_id -> value of the per-sample metric `name` of a cell.
  std::map<std::string, double> sample_metric(int64_t cell_id, const std::string& name) const;
  std::vector<std::pair<std::string, std::string>> run_fields(int64_t run_id) const;
  std::string integrity_check() const;  // "ok" when sound
  // Folds the WAL into the database file (before it is copied or renamed).
  void checkpoint() const;
  // Runs `body` in one transaction (BEGIN IMMEDIATE ... COMMIT; ROLLBACK when it throws).
  void in_transaction(const std::function<void()>& body);

  // The connection itself, for tests that inspect the schema; kvbench's own code queries
  // through the methods above.
  sqlite3* handle() const { return db_; }

 private:
  friend class SourceDatabase;
  void exec(const std::string& sql) const;
  void set_wal_mode();
  // 0: no schema_version table; -1: the table is empty.
  int64_t schema_version() const;
  // InputError when the file, without kvbench's schema_version, has tables of its own.
  void refuse_foreign_database() const;
  InputError newer_schema(int64_t found) const;  // "schema_version is N, this kvbench reads..."
  void copy_into_memory();  // replaces db_ by a copy of its file in memory
  int64_t create_schema();  // each returns the version it leaves
  int64_t migrate_from_1();  // returns the new version
  int64_t migrate_from_2();
  int64_t migrate_from_3();
  int64_t migrate_from_4();
  // Adds `columns` ("name definition", from the schema's lists) to `table` and bumps the
  // version, when it is `from` inside the transaction.
  int64_t add_columns(int64_t from, const std::string& table,
                      const std::vector<std::string>& columns);
  std::string path_;
  bool has_fingerprints_ = true;  // false: a version-4 file read as it is (read-only)
  sqlite3* db_ = nullptr;
};

// Another results database attached read-only to a store's connection, for merging: its runs
// and cells as typed rows, and copies of its rows into the store under new ids (inside the
// store's in_transaction). One at a time per store; detached when destroyed.
class SourceDatabase {
 public:
  // InputError "<path>: cannot open database (...)" when SQLite cannot attach it.
  SourceDatabase(ResultStore& into, const std::string& path);
  ~SourceDatabase();
  SourceDatabase(const SourceDatabase&) = delete;
  SourceDatabase& operator=(const SourceDatabase&) = delete;

  struct Summary {
    int64_t schema_version = -1;  // -1: none recorded
    std::set<std::string> suites;
  };
  // InputError "<path>: not a kvbench results database" unless it has kvbench's five tables.
  Summary summary() const;

  struct Run {
    int64_t id = 0;
    std::string identity;  // the same run in two inputs has the same identity
    std::string started_at, finished_at, status;
  };
  std::vector<Run> runs() const;

  struct Cell {
    int64_t id = 0, run_id = 0;
    std::string config_json, status;
    std::string when;  // finished_at, or started_at when unfinished
    std::string model_fingerprint;  // "" unknown
  };
  std::vector<Cell> cells() const;

  // Copies run `id` into the store as `new_id`.
  void copy_run(int64_t id, int64_t new_id);
  // Copies cell `id` with its samples and metrics (in their order) into the store as `new_id`
  // of run `new_run_id`.
  void copy_cell(int64_t id, int64_t new_id, int64_t new_run_id);

 private:
  sqlite3* db_;
  std::string path_;
};

// Current UTC time as ISO 8601.
std::string utc_now();

}  // namespace kvb
