// Committed baselines (results/baselines/*.json) and the CI regression check against them.
// A cell is identified by its normalised config JSON (cells.config_json); its metrics and a
// digest of its predictions are compared.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/store/result_store.h"

namespace kvb {

using json = nlohmann::json;

// Metrics a baseline records by default when a cell has them: the score, plus what is
// deterministic on the CPU and moves when a method's selection changes (timings are not).
const std::vector<std::string>& default_baseline_metrics();

// The baseline of every complete cell in `store`, recording `metrics` (those a cell has).
// InputError naming `where` (the database) when no cell is complete.
json make_baseline(const ResultStore& store, const std::vector<std::string>& metrics,
                   const std::string& where);

struct CheckOptions {
  // Absolute tolerance per metric name, over the baseline's own "tolerances"; "default" applies
  // to metrics not named. Unset everywhere: 0, exact, as deterministic CPU runs allow.
  std::map<std::string, double> tolerances;
  bool allow_improvements = false;  // a better value beyond tolerance is a note, not a failure
  bool ignore_predictions = false;  // skip the predictions digest
};

struct CheckReport {
  std::vector<std::string> regressions;  // worse beyond tolerance: always a failure
  std::vector<std::string> changes;      // better, neutral-metric or prediction changes
  std::vector<std::string> missing;      // in the baseline, not complete in the database
  std::vector<std::string> added;        // in the database only: a note
  int compared = 0;
  bool changes_fail = true;
  bool passed() const { return regressions.empty() && missing.empty() && (!changes_fail || changes.empty()); }
  std::string text() const;  // each finding on one line, then a summary line
};

// `baseline_path` names the file in messages. InputError on a malformed baseline.
CheckReport check_baseline(const ResultStore& store, const json& baseline,
                           const std::string& baseline_path, const CheckOptions& options);

}  // namespace kvb
