#include "harness/scaleout/merge.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/common/error.h"
#include "harness/store/result_store.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

// A prepared statement on the merge's own connection; finalised on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      throw std::runtime_error("sqlite prepare: " + std::string(sqlite3_errmsg(db)) + " in " + sql);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error("sqlite step: " + std::string(sqlite3_errmsg(db_)));
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errmsg(db);
    sqlite3_free(error);
    throw std::runtime_error("sqlite: " + message);
  }
}

// A file: URI opening `path` read-only (the characters URIs reserve are escaped).
std::string readonly_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : fs::absolute(path).string()) {
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

// Attaches one input as schema "src" for the lifetime of the object.
class Attached {
 public:
  Attached(sqlite3* db, const std::string& path) : db_(db) {
    Stmt s(db, "ATTACH DATABASE ? AS src");
    s.bind(1, readonly_uri(path));
    try {
      s.step();
    } catch (const std::runtime_error& e) {
      throw InputError(path + ": cannot open database (" + e.what() + ")");
    }
  }
  ~Attached() { sqlite3_exec(db_, "DETACH DATABASE src", nullptr, nullptr, nullptr); }

 private:
  sqlite3* db_;
};

struct SourceInfo {
  std::string path;
  int64_t schema_version = -1;
  std::set<std::string> suites;
};

SourceInfo inspect(sqlite3* db, const std::string& path) {
  Attached src(db, path);
  SourceInfo info;
  info.path = path;
  try {
    Stmt has(db, "SELECT count(*) FROM src.sqlite_master WHERE type = 'table' AND "
                 "name IN ('schema_version', 'runs', 'cells', 'samples', 'metrics')");
    has.step();
    if (has.integer(0) != 5) throw InputError(path + ": not a kvbench results database");
    Stmt version(db, "SELECT version FROM src.schema_version");
    info.schema_version = version.step() ? version.integer(0) : -1;
    Stmt suites(db, "SELECT DISTINCT suite FROM src.runs");
    while (suites.step()) info.suites.insert(suites.text(0));
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw InputError(path + ": not a kvbench results database (" + e.what() + ")");
  }
  return info;
}

int status_rank(const std::string& status) {
  return status == "complete" ? 2 : status == "failed" ? 1 : 0;
}

// One cell row of one input, a candidate for its config.
struct Candidate {
  size_t source = 0;
  int64_t id = 0, run_id = 0;
  std::string status, when;  // finished_at, or started_at when unfinished
  // Better = complete before failed before running, then later, then from a later input.
  auto rank() const { return std::make_tuple(status_rank(status), when, source); }
};

// One run row of one input.
struct RunRow {
  size_t source = 0;
  int64_t id = 0;
  std::string identity, started_at, finished_at, status;
  auto rank() const {
    return std::make_tuple(status != "running", finished_at, source);
  }
};

std::string join_paths(const std::vector<SourceInfo>& infos, int64_t version) {
  std::string out;
  for (const SourceInfo& i : infos)
    if (i.schema_version == version) out += (out.empty() ? "" : ", ") + i.path;
  return out;
}

}  // namespace

MergeSummary merge_databases(const std::string& out, const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw InputError("merge: give at least one input database");
  // The sources, OUT first when it exists; a file listed twice counts once.
  std::vector<std::string> sources;
  std::set<std::string> seen;
  auto add_source = [&](const std::string& path) {
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(path, ec).string();
    if (seen.insert(ec ? path : canonical).second) sources.push_back(path);
  };
  if (fs::exists(out)) {
    // Validates OUT (an InputError when it is not a kvbench database of this schema version)
    // and checkpoints its WAL, so no stale -wal file outlives the rename below.
    ResultStore existing(out);
    existing.checkpoint();
    add_source(out);
  }
  for (const std::string& in : inputs) {
    if (!fs::is_regular_file(in)) throw InputError(in + ": no such database");
    add_source(in);
  }

  const std::string tmp = out + ".merging-" + std::to_string(getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::remove(tmp + "-wal", ec);
  fs::remove(tmp + "-shm", ec);
  sqlite3* db = nullptr;
  auto cleanup = [&] {
    if (db) sqlite3_close(db);
    db = nullptr;
    std::error_code ignored;
    fs::remove(tmp, ignored);
    fs::remove(tmp + "-wal", ignored);
    fs::remove(tmp + "-shm", ignored);
  };
  MergeSummary summary;
  try {
    { ResultStore create(tmp); }  // the schema, defined once in result_store.cpp
    if (sqlite3_open_v2(tmp.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, nullptr) !=
        SQLITE_OK)
      throw InputError(tmp + ": cannot open: " + sqlite3_errmsg(db));
    sqlite3_busy_timeout(db, 10000);
    exec(db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=OFF;");

    // 1. Refuse mixed schema versions and mixed suites before writing anything.
    std::vector<SourceInfo> infos;
    for (const std::string& s : sources) infos.push_back(inspect(db, s));
    std::set<int64_t> versions;
    for (const SourceInfo& i : infos) versions.insert(i.schema_version);
    if (versions.size() > 1) {
      std::string detail;
      for (int64_t v : versions)
        detail += (detail.empty() ? "" : "; ") + std::string("schema_version ") +
                  std::to_string(v) + ": " + join_paths(infos, v);
      throw InputError("merge: refusing to merge databases of different schema versions (" +
                       detail + ")");
    }
    if (*versions.begin() != ResultStore::kSchemaVersion)
      throw InputError(infos.front().path + ": schema_version is " +
                       std::to_string(*versions.begin()) + ", this kvbench reads version " +
                       std::to_string(ResultStore::kSchemaVersion));
    std::map<std::string, std::string> suite_of;  // suite -> first file holding it
    for (const SourceInfo& i : infos)
      for (const std::string& s : i.suites) suite_of.emplace(s, i.path);
    if (suite_of.size() > 1) {
      std::string detail;
      for (const auto& [suite, path] : suite_of)
        detail += (detail.empty() ? "" : ", ") + path + " holds suite \"" + suite + "\"";
      throw InputError("merge: refusing to merge runs of different suites (" + detail + ")");
    }
    if (suite_of.empty()) throw InputError("merge: the inputs hold no runs");
    summary.suite = suite_of.begin()->first;
    summary.inputs = int(sources.size());

    // 2. Choose one row per config, and the runs those rows belong to.
    std::map<std::string, Candidate> best;
    std::map<std::string, RunRow> runs;                     // identity -> chosen row
    std::vector<std::map<int64_t, std::string>> run_identity(sources.size());  // old id -> identity
    int64_t rows = 0;
    for (size_t si = 0; si < sources.size(); ++si) {
      Attached src(db, sources[si]);
      Stmt r(db, "SELECT id, suite || char(31) || suite_json || char(31) || command || char(31) || "
                 "started_at || char(31) || coalesce(host, '') || char(31) || coalesce(git_commit, '') || "
                 "char(31) || coalesce(threads, ''), started_at, "
                 "coalesce(finished_at, ''), status FROM src.runs");
      while (r.step()) {
        RunRow row{si, r.integer(0), r.text(1), r.text(2), r.text(3), r.text(4)};
        run_identity[si][row.id] = row.identity;
        auto it = runs.find(row.identity);
        if (it == runs.end() || it->second.rank() < row.rank()) runs[row.identity] = row;
      }
      Stmt c(db, "SELECT id, run_id, config_json, status, coalesce(finished_at, started_at) "
                 "FROM src.cells");
      while (c.step()) {
        ++rows;
        Candidate cand{si, c.integer(0), c.integer(1), c.text(3), c.text(4)};
        const std::string config = c.text(2);
        auto it = best.find(config);
        if (it == best.end() || it->second.rank() < cand.rank()) best[config] = cand;
      }
    }
    summary.cells = int64_t(best.size());
    summary.duplicates = rows - summary.cells;

    // New ids: runs by start time (then input, old id); cells by their run, then old id.
    std::set<std::string> used_runs;
    for (const auto& [config, cand] : best)
      used_runs.insert(run_identity[cand.source].at(cand.run_id));
    std::vector<const RunRow*> run_order;
    for (const auto& [identity, row] : runs)
      if (used_runs.count(identity)) run_order.push_back(&row);
    std::sort(run_order.begin(), run_order.end(), [](const RunRow* a, const RunRow* b) {
      return std::tie(a->started_at, a->source, a->id) < std::tie(b->started_at, b->source, b->id);
    });
    std::map<std::string, int64_t> new_run_id;
    for (size_t i = 0; i < run_order.size(); ++i) new_run_id[run_order[i]->identity] = int64_t(i + 1);
    std::vector<std::pair<std::tuple<int64_t, size_t, int64_t>, const Candidate*>> cell_order;
    for (const auto& [config, cand] : best) {
      const int64_t run = new_run_id.at(run_identity[cand.source].at(cand.run_id));
      cell_order.push_back({{run, cand.source, cand.id}, &cand});
      summary.complete += cand.status == "complete";
    }
    std::sort(cell_order.begin(), cell_order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::vector<std::pair<int64_t, const Candidate*>>> cells_from(sources.size());
    for (size_t i = 0; i < cell_order.size(); ++i)
      cells_from[cell_order[i].second->source].push_back({int64_t(i + 1), cell_order[i].second});

    // 3. Copy: runs first (cells refer to them), then cells with their samples and metrics.
    for (size_t si = 0; si < sources.size(); ++si) {
      Attached src(db, sources[si]);
      exec(db, "BEGIN IMMEDIATE");
      for (const RunRow* r : run_order) {
        if (r->source != si) continue;
        Stmt s(db, "INSERT INTO main.runs (id, suite, suite_json, command, started_at, "
                   "finished_at, status, git_commit, build_type, torch_version, device, threads, "
                   "host, warnings) SELECT ?, suite, suite_json, command, started_at, finished_at, "
                   "status, git_commit, build_type, torch_version, device, threads, host, warnings "
                   "FROM src.runs WHERE id = ?");
        s.bind(1, new_run_id.at(r->identity)).bind(2, r->id).step();
      }
      exec(db, "COMMIT");
    }
    for (size_t si = 0; si < sources.size(); ++si) {
      if (cells_from[si].empty()) continue;
      Attached src(db, sources[si]);
      exec(db, "BEGIN IMMEDIATE");
      for (const auto& [new_id, cand] : cells_from[si]) {
        const int64_t run = new_run_id.at(run_identity[si].at(cand->run_id));
        Stmt cell(db, "INSERT INTO main.cells (id, run_id, config_json, model, dataset, method, "
                      "budget, seed, status, error, started_at, finished_at, elapsed_s) SELECT ?, "
                      "?, config_json, model, dataset, method, budget, seed, status, error, "
                      "started_at, finished_at, elapsed_s FROM src.cells WHERE id = ?");
        cell.bind(1, new_id).bind(2, run).bind(3, cand->id).step();
        Stmt samples(db, "INSERT INTO main.samples SELECT ?, sample_id, input_length, prediction, "
                         "answers_json, score FROM src.samples WHERE cell_id = ? ORDER BY rowid");
        samples.bind(1, new_id).bind(2, cand->id).step();
        Stmt metrics(db, "INSERT INTO main.metrics SELECT ?, sample_id, name, value, unit FROM "
                         "src.metrics WHERE cell_id = ? ORDER BY rowid");
        metrics.bind(1, new_id).bind(2, cand->id).step();
      }
      exec(db, "COMMIT");
    }
    summary.runs = int64_t(run_order.size());
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    Stmt check(db, "PRAGMA integrity_check");
    if (!check.step() || check.text(0) != "ok")
      throw std::runtime_error(tmp + ": integrity check failed: " + check.text(0));
  } catch (...) {
    cleanup();
    throw;
  }
  sqlite3_close(db);  // the last connection: checkpoints and removes tmp's -wal
  db = nullptr;
  fs::remove(out + "-wal", ec);
  fs::remove(out + "-shm", ec);
  fs::rename(tmp, out, ec);
  if (ec) {
    cleanup();
    throw InputError(out + ": cannot write (" + ec.message() + ")");
  }
  return summary;
}

std::vector<Cell> missing_cells(const std::string& db, const Suite& suite) {
  if (!fs::is_regular_file(db)) throw InputError(db + ": no such database");
  ResultStore store(db);
  std::vector<Cell> missing;
  std::set<std::string> seen;
  for (const Cell& c : suite.cells()) {
    const std::string key = c.key();
    if (seen.insert(key).second && !store.cell_complete(key)) missing.push_back(c);
  }
  return missing;
}

}  // namespace kvb
