#include "harness/runner/run_cells.h"

#include <algorithm>
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

// What names a cell apart from how a build normalises it: the config without the dataset's
// revision (a row of an earlier revision has the same identity as its cell's new row).
std::string identity(json config) {
  if (config.contains("dataset") && config["dataset"].is_object()) config["dataset"].erase("revision");
  return config.dump();
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

  // Rows of this suite config's runs that no cell here has as its key, by identity.
  std::map<int64_t, bool> same_config;  // run -> its suite JSON is this run's
  const auto of_this_config = [&](int64_t run) {
    auto it = same_config.find(run);
    if (it == same_config.end())
      it = same_config.emplace(run, store.run_info(run).suite_json == info.suite_json).first;
    return it->second;
  };
  std::map<std::string, std::optional<CellRow>> otherwise;  // identity -> row
  for (const CellRow& row : of_suite)
    if (!keys.count(row.config_json) && of_this_config(row.run_id))
      keep(otherwise[identity(json::parse(row.config_json))], row);

  std::vector<CellRow> shown;
  for (const Cell& cell : cells) {
    std::optional<CellRow> under_key;
    for (const CellRow& row : store.cells_with_config(cell.key())) keep(under_key, row);
    // The same cell stored under another config: shown only where its own key has no result.
    const auto other = otherwise.find(identity(cell.to_json()));
    if (other != otherwise.end() && under_key && under_key->status == "complete")
      otherwise.erase(other);
    if (under_key) shown.push_back(*under_key);
    if (under_key && under_key->status == "complete") continue;
    std::string state = "not run";
    if (under_key)
      state = under_key->status == "failed" ? "failed: " + first_line(under_key->error)
                                            : "begun, not finished";
    out.missing.push_back({cell.description(), state});
  }
  for (const auto& [cell_identity, row] : otherwise)
    if (row) shown.push_back(*row), ++out.stored_otherwise;
  std::sort(shown.begin(), shown.end(), [](const CellRow& a, const CellRow& b) { return a.id < b.id; });
  out.rows = std::move(shown);
  return out;
}

}  // namespace kvb
