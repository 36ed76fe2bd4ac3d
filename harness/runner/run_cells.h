// The cells a run's tables show (`kvbench run`'s table, `show`, `report`): those stored by the
// runs of its suite config (the same suite JSON, overrides applied, as stored with the run), and
// any cell of that suite, as it expands here, stored under its key by another suite's run (a
// run skips a cell complete under its key). So a run of the suite with other --set values is
// never mixed in. Where a cell was stored twice under two configs of the same cell (an earlier
// kvbench normalised it differently, e.g. a dataset revision), the row under the config it
// expands to here is shown.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/store/result_store.h"

namespace kvb {

// A cell of the suite, as it expands here, with no complete row under its key: one that
// `kvbench run` of it here would still run.
struct MissingCell {
  std::string description;  // Cell::description()
  std::string state;        // "not run", "failed: <first line of its error>", "begun, not finished"
};

struct RunCells {
  // In stored order: each cell's complete row, else its newest (failed, running).
  std::vector<CellRow> rows;
  int64_t suite_cells = 0;           // the cells the suite expands to here
  std::vector<MissingCell> missing;  // in the suite's order
  // Rows of the suite config's runs stored under configs it does not expand to here (other
  // paths, e.g. ${SHARED} elsewhere; an earlier kvbench): shown, yet a run here would redo
  // their cells, which `missing` lists.
  int64_t stored_otherwise = 0;
  // Why the suite cannot be expanded here (a dataset file it names is absent on this machine),
  // "" when it was. Then `rows` are every row stored under the suite's name, other configs of
  // it included, and `missing` is empty.
  std::string unexpanded;
};

RunCells run_cells(const ResultStore& store, int64_t run_id);

}  // namespace kvb
