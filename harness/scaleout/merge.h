// Merging shard databases into one: `kvbench merge OUT.db IN1.db IN2.db ...`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/suite/suite.h"

namespace kvb {

struct MergeSummary {
  std::string suite;
  int inputs = 0;              // databases read (an existing OUT counts as one)
  int64_t runs = 0;            // runs copied (identical runs found in several inputs count once)
  int64_t cells = 0;           // distinct configs in the output
  int64_t complete = 0;        // of which complete
  int64_t duplicates = 0;      // cell rows dropped because another input had the same config
};

// Merges `inputs` (and OUT itself when it exists) into `out`, writing a temporary file renamed
// over `out` at the end, so nothing is half-written. Every input must be a kvbench database of
// this kvbench's schema version holding runs of one and the same suite; otherwise an InputError
// (nothing written). A config present in several inputs is kept once: a complete row before a
// failed one before a running (interrupted) one, then the latest finished, then the later
// input. Runs, cells, samples and metrics get new ids; only runs some kept cell belongs to are
// copied, and the same run found in several inputs (same suite JSON, command line, start
// second, host, commit and threads: e.g. in an earlier merge and in its shard) is kept once.
// `suite` (`merge --suite`): the suite the inputs must hold, checked before writing anything.
MergeSummary merge_databases(const std::string& out, const std::vector<std::string>& inputs,
                             const std::optional<std::string>& suite = std::nullopt);

// The suite's cells that `db` lacks as complete rows (by normalised config).
std::vector<Cell> missing_cells(const std::string& db, const Suite& suite);

}  // namespace kvb
