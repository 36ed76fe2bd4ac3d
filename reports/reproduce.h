// Named reproductions of published results: a paper table (reports/papers/*.json), a suite to
// run (a miniature on the embedded/tiny models and synthetic tasks, or the real one on the
// user's checkpoint and LongBench files) and the paper's qualitative claims.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/report_data.h"

namespace kvb {

using json = nlohmann::json;

// A published table: column names (budgets, or fractions such as "1/5") and per method either
// one value per column or a single budget-less value (Full).
struct PaperTable {
  std::string paper, url, source, title, model, metric;
  std::vector<std::string> columns;
  std::map<std::string, std::map<std::string, double>> values;  // method -> column -> value
  std::map<std::string, double> reference;                        // budget-less methods
};

// "a beats b beats c" at every column (or on the mean over columns): one claim of the paper.
struct Claim {
  std::string text;
  std::vector<std::string> order;  // method labels, best first
  bool on_average = false;
};

struct ReproductionMode {
  std::string description;
  std::map<std::string, int64_t> budgets;  // paper column -> our budget
  json suite;                              // without "budgets"; ${MODEL} ${DATA} ${SHARED}
  bool comparable = false;  // same metric as the paper's: raw differences mean something
};

struct Reproduction {
  std::string name, title, metric;  // metric: the cell metric compared ("score", "recall")
  std::optional<PaperTable> table;  // none: the paper gives claims only (a figure)
  std::vector<Claim> claims;
  ReproductionMode miniature;
  std::optional<ReproductionMode> real;
};

std::vector<std::string> reproduction_names();
// A "miniature" or "real" object of a definition (`where`: its JSON path, for messages): its
// suite names exactly one model, since the comparison is of one model's averages.
ReproductionMode parse_reproduction_mode(const json& j, const std::string& where);
// Reads reports/reproductions/<name>.json and its paper table. InputError naming file and field.
Reproduction load_reproduction(const std::string& name);

struct Placeholders {
  std::string model, data, shared;
};
// The suite to run: placeholders substituted, budgets from the mode's mapping, name set.
json reproduction_suite(const Reproduction& r, const ReproductionMode& mode,
                        const Placeholders& values, const std::string& suite_name);

// The comparison of a run with the paper: paper | ours | difference per method and column,
// each also as % of Full, then each claim on the paper's numbers and on ours (Markdown). Only
// the cells with the question in the window meet the paper; cells run with the context shared
// (reproduce --context-sharing) add the drop per method after it.
std::string compare_with_paper(const Reproduction& r, const ReproductionMode& mode,
                               const ReportData& ours);

}  // namespace kvb
