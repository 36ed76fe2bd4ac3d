// The cells a run's tables show: its suite, as stored with the run (overrides applied), expanded
// into cells, each found in the store by the key `kvbench run` resumes by (whichever run or
// suite stored it: a run skips a cell that is complete under its key). So another config
// stored under the suite's name (a run with other --set values) is never mixed in, and a cell
// this build normalises differently counts as missing, as a run would redo it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/store/result_store.h"

namespace kvb {

// A cell of the suite with no complete row: one that `kvbench run` of it would still run.
struct MissingCell {
  std::string description;  // Cell::description()
  std::string state;        // "not run", "failed: <first line of its error>", "begun, not finished"
};

struct RunCells {
  // In stored order: each cell's complete row, else its newest (failed, running).
  std::vector<CellRow> rows;
  int64_t suite_cells = 0;           // the cells the suite expands to
  std::vector<MissingCell> missing;  // in the suite's order
  // Why the suite cannot be expanded here (e.g. a dataset file it names is absent on this
  // machine), "" when it was. Then `rows` are every row stored under the suite's name, other
  // configs of it included, and `missing` is empty.
  std::string unexpanded;
};

RunCells run_cells(const ResultStore& store, int64_t run_id);

}  // namespace kvb
