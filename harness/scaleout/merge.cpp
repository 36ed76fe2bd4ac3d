#include "harness/scaleout/merge.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/common/error.h"
#include "harness/store/result_store.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

struct SourceInfo {
  std::string path;
  int64_t schema_version = -1;
  std::set<std::string> suites;
};

SourceInfo inspect(ResultStore& store, const std::string& path) {
  const SourceDatabase::Summary summary = SourceDatabase(store, path).summary();
  return SourceInfo{.path = path, .schema_version = summary.schema_version,
                    .suites = summary.suites};
}

int status_rank(const std::string& status) {
  return status == "complete" ? 2 : status == "failed" ? 1 : 0;
}

// One cell row of one input, a candidate for its config.
struct Candidate {
  size_t source = 0;
  int64_t id = 0, run_id = 0;
  std::string status, when;  // finished_at, or started_at when unfinished
  std::string model_fingerprint;
  // Better = complete before failed before running, then later, then from a later input.
  auto rank() const { return std::make_tuple(status_rank(status), when, source); }
};

// The known model fingerprint of one cell's complete results in the inputs, and the input that
// holds it first: two of them (shards run on machines with different checkpoints at one path)
// leave no result to choose.
void refuse_two_models(std::map<std::string, size_t>& seen, const Candidate& cand,
                       const std::vector<std::string>& sources, const std::string& config) {
  if (cand.status != "complete" || cand.model_fingerprint.empty()) return;
  seen.emplace(cand.model_fingerprint, cand.source);
  if (seen.size() < 2) return;
  const auto& [a, a_source] = *seen.begin();
  const auto& [b, b_source] = *std::next(seen.begin());
  throw InputError("merge: " + sources[a_source] + " and " + sources[b_source] +
                   " hold results of one cell run with different models under the name it "
                   "gives (" + a + ", " + b + "): " + config);
}

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

MergeSummary merge_databases(const std::string& out, const std::vector<std::string>& inputs,
                             const std::optional<std::string>& suite) {
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
  std::optional<ResultStore> store;  // the merged database, written at `tmp`
  auto cleanup = [&] {
    store.reset();
    std::error_code ignored;
    fs::remove(tmp, ignored);
    fs::remove(tmp + "-wal", ignored);
    fs::remove(tmp + "-shm", ignored);
  };
  MergeSummary summary;
  try {
    store.emplace(tmp);  // the schema, declared once in result_store.cpp

    // 1. Refuse mixed schema versions and mixed suites before writing anything.
    std::vector<SourceInfo> infos;
    for (const std::string& s : sources) infos.push_back(inspect(*store, s));
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
    if (suite && *suite != summary.suite)
      throw InputError("merge --suite: the databases hold suite \"" + summary.suite + "\", not \"" +
                       *suite + "\"");
    summary.inputs = int(sources.size());

    // 2. Choose one row per config, and the runs those rows belong to.
    std::map<std::string, Candidate> best;
    std::map<std::string, std::map<std::string, size_t>> models_of;  // config -> fingerprints
    std::map<std::string, RunRow> runs;                     // identity -> chosen row
    std::vector<std::map<int64_t, std::string>> run_identity(sources.size());  // old id -> identity
    int64_t rows = 0;
    for (size_t si = 0; si < sources.size(); ++si) {
      const SourceDatabase src(*store, sources[si]);
      for (const SourceDatabase::Run& r : src.runs()) {
        RunRow row{.source = si, .id = r.id, .identity = r.identity, .started_at = r.started_at,
                   .finished_at = r.finished_at, .status = r.status};
        run_identity[si][row.id] = row.identity;
        auto it = runs.find(row.identity);
        if (it == runs.end() || it->second.rank() < row.rank()) runs[row.identity] = row;
      }
      for (const SourceDatabase::Cell& c : src.cells()) {
        ++rows;
        Candidate cand{.source = si, .id = c.id, .run_id = c.run_id, .status = c.status,
                       .when = c.when, .model_fingerprint = c.model_fingerprint};
        refuse_two_models(models_of[c.config_json], cand, sources, c.config_json);
        auto it = best.find(c.config_json);
        if (it == best.end() || it->second.rank() < cand.rank()) best[c.config_json] = cand;
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
      SourceDatabase src(*store, sources[si]);
      store->in_transaction([&] {
        for (const RunRow* r : run_order)
          if (r->source == si) src.copy_run(r->id, new_run_id.at(r->identity));
      });
    }
    for (size_t si = 0; si < sources.size(); ++si) {
      if (cells_from[si].empty()) continue;
      SourceDatabase src(*store, sources[si]);
      store->in_transaction([&] {
        for (const auto& [new_id, cand] : cells_from[si])
          src.copy_cell(cand->id, new_id, new_run_id.at(run_identity[si].at(cand->run_id)));
      });
    }
    summary.runs = int64_t(run_order.size());
    store->checkpoint();
    const std::string integrity = store->integrity_check();
    if (integrity != "ok")
      throw std::runtime_error(tmp + ": integrity check failed: " + integrity);
  } catch (...) {
    cleanup();
    throw;
  }
  store.reset();  // the last connection: checkpoints and removes tmp's -wal
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
  ResultStore store(db, ResultStore::Access::read);
  std::vector<Cell> missing;
  std::set<std::string> seen;
  for (const Cell& c : suite.cells()) {
    const std::string key = c.key();
    if (seen.insert(key).second && !store.cell_complete(key)) missing.push_back(c);
  }
  return missing;
}

}  // namespace kvb
