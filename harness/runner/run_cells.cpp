#include "harness/runner/run_cells.h"

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

// config_json -> its first complete row, else its newest.
std::map<std::string, CellRow> row_by_key(const std::vector<CellRow>& rows) {
  std::map<std::string, CellRow> by_key;
  for (const CellRow& row : rows) {
    CellRow& kept = by_key[row.config_json];
    if (kept.status != "complete") kept = row;
  }
  return by_key;
}

}  // namespace

RunCells run_cells(const ResultStore& store, int64_t run_id) {
  RunCells out;
  const std::optional<std::vector<Cell>> cells =
      suite_cells(store.run_info(run_id), run_id, out.unexpanded);
  if (!cells) {
    out.rows = store.cells_of_run(run_id);
    return out;
  }
  std::vector<Cell> unique;  // a key once (the store holds one result per key)
  std::set<std::string> seen;
  for (const Cell& cell : *cells)
    if (seen.insert(cell.key()).second) unique.push_back(cell);
  out.suite_cells = int64_t(unique.size());
  const std::vector<CellRow> all = store.all_cells();
  const std::map<std::string, CellRow> by_key = row_by_key(all);
  for (const Cell& cell : unique) {
    const auto row = by_key.find(cell.key());
    if (row != by_key.end() && row->second.status == "complete") continue;
    std::string state = "not run";
    if (row != by_key.end())
      state = row->second.status == "failed" ? "failed: " + first_line(row->second.error)
                                             : "begun, not finished";
    out.missing.push_back({cell.description(), state});
  }
  std::set<int64_t> kept_ids;  // the row kept for each of the suite's keys
  for (const Cell& cell : unique)
    if (const auto row = by_key.find(cell.key()); row != by_key.end()) kept_ids.insert(row->second.id);
  for (const CellRow& row : all)
    if (kept_ids.count(row.id)) out.rows.push_back(row);
  return out;
}

}  // namespace kvb
