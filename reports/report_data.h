// What a report reads from a results database: the complete cells of one run's suite with their
// cell-level metrics and per-sample scores, the suite's cells that have none, plus the run's
// provenance.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/runner/run_cells.h"
#include "harness/store/result_store.h"

namespace kvb {

using json = nlohmann::json;

struct SampleScore {
  std::string id;
  double score = 0;
  std::optional<double> depth;  // needle depth in [0, 1] (per-sample metric meta.depth)
};

struct CellData {
  std::string model, dataset, method;  // method: the suite's label
  std::string group;                   // dataset (and model) as shown in tables and plots
  json dataset_params;
  std::optional<int64_t> budget;       // none: a budget-less method (Full), the reference row
  int64_t seed = 0;
  std::map<std::string, double> metrics;
  std::string score_unit;              // the dataset's metric, e.g. passkey_accuracy
  std::vector<SampleScore> samples;
};

// A run whose complete cells a report shows beside the reported run's (resumed, merged shards).
struct OtherRun {
  int64_t id = 0;
  int cells = 0;
  // Its provenance fields that differ from the reported run's ("git commit `abc`, threads
  // `1`"), "" where none does.
  std::string differs;
};

struct ReportData {
  int64_t run_id = 0;
  std::vector<std::pair<std::string, std::string>> provenance;  // runs row: suite, commit, ...
  std::string suite_name, suite_json;
  std::string command;  // the run's command, then those of other runs whose cells it lists, a line each
  std::vector<OtherRun> other_runs;  // in order of first appearance
  // The complete cells of the run's suite, in stored order (harness/runner/run_cells.h: which
  // rows those are).
  std::vector<CellData> cells;
  int64_t suite_cells = 0;           // RunCells' fields
  std::vector<MissingCell> missing;
  int64_t stored_otherwise = 0;      // RunCells' field
  std::string missing_unknown;       // RunCells::unexpanded
  // Set by per_model(): the one model (with its device suffix) these cells are of, out of the
  // run's several; summaries across datasets (averages, plots) name it.
  std::string only_model;
};

// Loads run `run_id` (or the latest run when none). InputError when the database holds no run.
ReportData load_report_data(const ResultStore& store, std::optional<int64_t> run_id,
                            const std::string& db_path);

// The data once per model, each with only that model's cells and `only_model` set, where the
// cells are of several models (averages across datasets never mix models); else {data}.
std::vector<ReportData> per_model(const ReportData& data);

// The suite's cells without a complete result: a heading naming how many (or why they could
// not be listed; "" when none is missing), then a line each for the first kMissingShown.
constexpr size_t kMissingShown = 40;
std::string missing_heading(const ReportData& data);
std::vector<std::string> missing_lines(const ReportData& data);

// Group names in order of first appearance.
std::vector<std::string> groups_of(const ReportData& data);
// Method labels, budget-less (reference) methods first, then in order of first appearance.
std::vector<std::string> methods_of(const ReportData& data);
// Distinct budgets, ascending.
std::vector<int64_t> budgets_of(const ReportData& data);

}  // namespace kvb
