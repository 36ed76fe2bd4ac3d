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
// InputError naming `where` (the database) when no cell is complete, or a recorded value is
// not a finite number (JSON has none to write).
json make_baseline(const ResultStore& store, const std::vector<std::string>& metrics,
                   const std::string& where);

// Whether any of a baseline's cells (its "cells" array) records `metric`.
bool records_metric(const json& cells, const std::string& metric);

struct CheckOptions {
  // Absolute tolerance per metric name, over the baseline's own "tolerances"; "default" applies
  // to metrics not named. Unset everywhere: 0, exact, as deterministic CPU runs allow.
  std::map<std::string, double> tolerances;
  // A better value beyond tolerance, or changed predictions, is a note, not a failure.
  bool allow_improvements = false;
  bool ignore_predictions = false;  // skip the predictions digest
};

struct CheckReport {
  // Worse beyond tolerance, or no longer a finite number: always a failure.
  std::vector<std::string> regressions;
  // A metric with no better direction (attended_mean, say) changed: always a failure.
  std::vector<std::string> changes;
  // Better beyond tolerance, or changed predictions: a failure unless improvements are allowed.
  std::vector<std::string> improvements;
  std::vector<std::string> missing;      // in the baseline, not complete in the database
  std::vector<std::string> added;        // in the database only: a note
  int compared = 0;
  bool improvements_fail = true;
  bool passed() const {
    return regressions.empty() && changes.empty() && missing.empty() &&
           (!improvements_fail || improvements.empty());
  }
  std::string text() const;  // each finding on one line, then a summary line
};

// `baseline_path` names the file in messages. InputError on a malformed baseline, or a
// tolerance for a metric none of its cells records.
CheckReport check_baseline(const ResultStore& store, const json& baseline,
                           const std::string& baseline_path, const CheckOptions& options);

}  // namespace kvb
