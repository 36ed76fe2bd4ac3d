#include "harness/runner/run_cells.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "engine/common/error.h"
#include "harness/suite/suite.h"

namespace kvb {
namespace {

// The first line of a stored error, for a one-line list entry.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::optional<std::vector<Cell>> suite_cells(const RunInfo& info, int64_t run_id, std::string& why) {
  try {
    return parse_suite(json::parse(info.suite_json),
                       "suite " + info.suite + " as stored with run " + std::to_string(run_id))
        .cells();
  } catch (const InputError& e) {
    why = e.what();
    return std::nullopt;
  }
}

// A path's last component ("/a/shared/data/wordlists" -> "wordlists"), anything else as it is:
// where ${SHARED} or a model folder lies differs between machines, not what it names.
json without_folders(const json& value) {
  if (!value.is_string()) return value;
  const std::string text = value.get<std::string>();
  if (text.find('/') == std::string::npos) return value;
  return std::filesystem::path(text).filename().string();
}

// Whether a row stored by a run of the same suite JSON, under a config that is not `cell`'s key
// here, is `cell`'s: the same method label, budget, seed, model, device, dtype, sharing and
// generation settings, and the dataset params both have equal (paths by their last component).
// Fields that only one has, a dataset revision, the method's config (a newer build may add a
// field with its default) are not compared: within one suite, a label names one method config.
bool same_cell(const json& stored, const json& cell) {
  for (const char* key : {"budget", "seed", "max_new_tokens", "recall", "device", "dtype",
                          "context_sharing"})
    if (stored.value(key, json()) != cell.value(key, json())) return false;
  if (without_folders(stored.value("model", json())) != without_folders(cell.value("model", json())))
    return false;
  const json& sm = stored.value("method", json::object()), &cm = cell.at("method");
  if (sm.value("label", "") != cm.value("label", "")) return false;
  const json& sd = stored.value("dataset", json::object()), &cd = cell.at("dataset");
  if (sd.value("name", "") != cd.value("name", "")) return false;
  const json sp = sd.value("params", json::object()), cp = cd.value("params", json::object());
  for (const auto& [name, value] : sp.items())
    if (cp.contains(name) && without_folders(value) != without_folders(cp[name])) return false;
  return true;
}

// `row` replaces `kept` unless `kept` is complete: a complete row, else the newest.
void keep(std::optional<CellRow>& kept, const CellRow& row) {
  if (!kept || kept->status != "complete") kept = row;
}

}  // namespace

RunCells run_cells(const ResultStore& store, int64_t run_id) {
  RunCells out;
  const RunInfo info = store.run_info(run_id);
  const std::optional<std::vector<Cell>> expanded = suite_cells(info, run_id, out.unexpanded);
  const std::vector<CellRow> of_suite = store.cells_of_run(run_id);  // under the suite's name
  if (!expanded) {
    out.rows = of_suite;
    return out;
  }
  std::vector<Cell> cells;  // a key once (the store holds one result per key)
  std::set<std::string> keys;
  for (const Cell& cell : *expanded)
    if (keys.insert(cell.key()).second) cells.push_back(cell);
  out.suite_cells = int64_t(cells.size());

  // Rows the runs of this suite config stored under keys the suite does not expand to here.
  std::map<int64_t, bool> same_config;  // run -> its suite JSON is this run's
  const auto of_this_config = [&](int64_t run) {
    auto it = same_config.find(run);
    if (it == same_config.end())
      it = same_config.emplace(run, store.run_info(run).suite_json == info.suite_json).first;
    return it->second;
  };
  std::vector<std::pair<json, const CellRow*>> elsewhere;  // (its config, the row)
  for (const CellRow& row : of_suite)
    if (!keys.count(row.config_json) && of_this_config(row.run_id))
      elsewhere.emplace_back(json::parse(row.config_json), &row);

  // Each cell's row: complete under its key; else complete under another config of it (shown,
  // but a run here would redo the cell); else its failed or running row under its key.
  std::vector<CellRow> shown;
  std::set<const CellRow*> claimed;  // rows of `elsewhere` some cell took as its own
  for (const Cell& cell : cells) {
    std::optional<CellRow> under_key, stand_in;
    for (const CellRow& row : store.cells_with_config(cell.key())) keep(under_key, row);
    const json config = cell.to_json();
    for (const auto& [stored, row] : elsewhere)
      if (!claimed.count(row) && same_cell(stored, config)) {
        claimed.insert(row);
        if (row->status == "complete") keep(stand_in, *row);
      }
    const bool complete = under_key && under_key->status == "complete";
    if (complete) {
      shown.push_back(*under_key);
      continue;
    }
    if (stand_in) shown.push_back(*stand_in), ++out.stored_otherwise;
    else if (under_key) shown.push_back(*under_key);
    std::string state = "not run";
    if (under_key)
      state = under_key->status == "failed" ? "failed: " + first_line(under_key->error)
                                            : "begun, not finished";
    if (stand_in) state += " (a result under another config of it is shown)";
    out.missing.push_back({cell.description(), state});
  }
  std::sort(shown.begin(), shown.end(), [](const CellRow& a, const CellRow& b) { return a.id < b.id; });
  out.rows = std::move(shown);
  return out;
}

}  // namespace kvb
