#include "harness/runner/run_cells.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "harness/suite/suite.h"

namespace kvb {
namespace {

std::optional<std::vector<Cell>> suite_cells(const RunInfo& info, int64_t run_id, std::string& why) {
  try {
    return parse_stored_suite(json::parse(info.suite_json),
                       "suite " + info.suite + " as stored with run " + std::to_string(run_id))
        .cells();
  } catch (const InputError& e) {
    why = e.what();
    return std::nullopt;
  } catch (const json::exception&) {
    why = "its stored suite JSON does not parse";
    return std::nullopt;
  }
}

// A path's last component ("/a/shared/data/wordlists" -> "wordlists"), anything else as it is:
// where ${SHARED} or a model folder lies differs between machines, not what it names.
json without_folders(const json& value) {
  if (!value.is_string()) return value;
  const std::string text = value.get<std::string>();
  if (text.find('/') == std::string::npos) return value;
  std::filesystem::path path = std::filesystem::path(text).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "a/b/" names b
  return path.filename().string();
}

const json& object_at(const json& config, const char* key) {
  static const json empty = json::object();
  const auto it = config.is_object() ? config.find(key) : config.end();
  return config.is_object() && it != config.end() && it->is_object() ? *it : empty;
}

// A config without what a newer build may change about the same cell: the dataset's revision,
// the recall measurement's, and the method's config (a new field with its default; within one
// suite a label names one method config).
std::string core(const json& config) {
  if (!config.is_object()) return config.dump();
  json out = config;
  out.erase("recall_revision");
  if (out.contains("dataset") && out["dataset"].is_object()) out["dataset"].erase("revision");
  if (out.contains("method") && out["method"].is_object()) out["method"].erase("config");
  return out.dump();
}

// The core, and besides it where paths may lie elsewhere: the same method label, budget, seed,
// model, device, dtype, sharing and generation settings, and the dataset params both have equal
// (paths by their last component; a param only one has is not compared).
bool same_cell(const json& stored, const json& cell) {
  if (!stored.is_object()) return false;
  for (const char* key : {"budget", "seed", "max_new_tokens", "recall", "device", "dtype",
                          "context_sharing"})
    if (stored.value(key, json()) != cell.value(key, json())) return false;
  if (without_folders(stored.value("model", json())) != without_folders(cell.value("model", json())))
    return false;
  if (object_at(stored, "method").value("label", json()) != object_at(cell, "method").value("label", json()))
    return false;
  const json& sd = object_at(stored, "dataset");
  const json& cd = object_at(cell, "dataset");
  if (sd.value("name", json()) != cd.value("name", json())) return false;
  const json& sp = object_at(sd, "params");
  const json& cp = object_at(cd, "params");
  for (const auto& [name, value] : sp.items())
    if (cp.contains(name) && without_folders(value) != without_folders(cp[name])) return false;
  return true;
}

// `row` replaces `kept` unless `kept` is complete: a complete row, else the newest.
void keep(std::optional<CellRow>& kept, const CellRow& row) {
  if (!kept || kept->status != "complete") kept = row;
}

// For the cells without a row under their key (`open[c]`), the complete rows of `elsewhere`
// that are theirs: a row that matches exactly one of the suite's cells (`configs`), first by
// their core configs, then by same_cell, and that cell is open and not given one by the first
// pass; a row that could be two cells' is nobody's. The newest such row of a cell.
std::map<size_t, const CellRow*> stand_ins(const std::vector<json>& configs,
                                           const std::vector<bool>& open,
                                           const std::vector<std::pair<json, const CellRow*>>& elsewhere) {
  std::map<size_t, const CellRow*> out;
  std::set<const CellRow*> taken;
  const auto assign = [&](const std::function<bool(const json&, size_t)>& matches) {
    std::map<size_t, const CellRow*> found;
    for (const auto& [stored, row] : elsewhere) {
      if (row->status != "complete" || taken.count(row)) continue;
      std::vector<size_t> cells;
      for (size_t c = 0; c < configs.size(); ++c)
        if (matches(stored, c)) cells.push_back(c);
      if (cells.size() != 1 || !open[cells[0]] || out.count(cells[0])) continue;
      taken.insert(row);
      const CellRow*& kept = found[cells[0]];
      if (!kept || row->id > kept->id) kept = row;
    }
    out.insert(found.begin(), found.end());
  };
  std::vector<std::string> cores;
  for (const json& config : configs) cores.push_back(core(config));
  assign([&](const json& stored, size_t c) { return core(stored) == cores[c]; });
  assign([&](const json& stored, size_t c) { return same_cell(stored, configs[c]); });
  return out;
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
  std::vector<json> configs;       // their configs
  std::vector<std::string> cell_keys;  // and keys
  std::set<std::string> keys;
  for (const Cell& cell : *expanded) {
    json config = cell.to_json();
    std::string key = config.dump();
    if (!keys.insert(key).second) continue;
    cells.push_back(cell);
    configs.push_back(std::move(config));
    cell_keys.push_back(std::move(key));
  }
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
    if (!keys.count(row.config_json) && of_this_config(row.run_id)) {
      json config = json::parse(row.config_json, nullptr, /*allow_exceptions=*/false);
      if (!config.is_discarded()) elsewhere.emplace_back(std::move(config), &row);  // else nobody's
    }

  // Each cell's row: its complete row under its key, else its failed or running one there (a
  // redo that failed shows as failed), else a complete row stored under another config of it
  // (shown, though a run here would redo the cell).
  std::vector<CellRow> shown;
  std::vector<std::optional<CellRow>> under_key(cells.size());
  std::vector<bool> open;  // no row under its key
  for (size_t c = 0; c < cells.size(); ++c) {
    for (const CellRow& row : store.cells_with_config(cell_keys[c])) keep(under_key[c], row);
    open.push_back(!under_key[c]);
  }
  // cell -> its row under another config
  const std::map<size_t, const CellRow*> stand_in_of = stand_ins(configs, open, elsewhere);
  for (size_t c = 0; c < cells.size(); ++c) {
    const std::optional<CellRow>& row = under_key[c];
    if (row) shown.push_back(*row);
    if (row && row->status == "complete") continue;
    const auto stand_in = stand_in_of.find(c);
    if (stand_in != stand_in_of.end()) shown.push_back(*stand_in->second), ++out.stored_otherwise;
    std::string state = "not run";
    if (row) state = row->status == "failed" ? "failed: " + first_line(row->error) : "begun, not finished";
    out.missing.push_back({cells[c].description(), state, stand_in != stand_in_of.end()});
  }
  std::sort(shown.begin(), shown.end(), [](const CellRow& a, const CellRow& b) { return a.id < b.id; });
  out.rows = std::move(shown);
  return out;
}

}  // namespace kvb
