// The cells a run's tables show (`kvbench run`'s table, `show`, `report`): its suite, as stored
// with the run (overrides applied) and expanded here, one row per cell: the cell's complete row
// under its key (whichever run or suite stored it: a run skips a cell complete under its key),
// else its failed or running row there, else a complete row that a run of the same suite JSON
// stored under another config of the cell (an earlier kvbench normalised it differently, or
// ${SHARED} lay elsewhere; a row that could be two cells' is neither's). So a run of the suite
// with other --set values is never mixed in, and a cell redone under its new key shows once.
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
  bool stand_in_shown = false;  // a complete row under another config of it is in the table
  // What a listing adds after the cell: " (a result under another config of it is shown)", or "".
  std::string shown_note() const {
    return stand_in_shown ? " (a result under another config of it is shown)" : "";
  }
};

struct RunCells {
  // In stored order: each cell's complete row, else its newest (failed, running).
  std::vector<CellRow> rows;
  int64_t suite_cells = 0;           // the cells the suite expands to here
  std::vector<MissingCell> missing;  // in the suite's order
  // Cells shown by a complete row stored under another config of them (other paths, e.g.
  // ${SHARED} elsewhere; an earlier kvbench): a run here would redo them, and `missing` lists
  // them too.
  int64_t stored_otherwise = 0;
  // Why the suite cannot be expanded here (a dataset file it names is absent on this machine),
  // "" when it was. Then `rows` are every row stored under the suite's name, other configs of
  // it included, and `missing` is empty.
  std::string unexpanded;
};

RunCells run_cells(const ResultStore& store, int64_t run_id);

}  // namespace kvb
