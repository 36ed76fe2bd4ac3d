#include "reports/baseline.h"

#include <cmath>
#include <cstdio>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "harness/scaleout/shard.h"

namespace kvb {
namespace {

const char* kFormat = "kvbench-baseline/1";

struct StoredCell {
  std::string config;  // normalised: parsed and dumped with sorted keys
  std::string status;
  std::string error;
  std::map<std::string, double> metrics;
  std::string score_unit;
  std::string predictions_digest;
};

// FNV-1a over (sample id, prediction) pairs: any change in any generated text changes it.
std::string predictions_digest(const std::vector<SampleRow>& samples) {
  uint64_t h = 1469598103934665603ull;
  auto feed = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  };
  for (const SampleRow& s : samples) feed(s.sample_id), feed(s.prediction);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string normalised(const std::string& config_json) { return json::parse(config_json).dump(); }

std::vector<StoredCell> stored_cells(const ResultStore& store) {
  std::vector<StoredCell> out;
  for (const CellRow& row : store.all_cells()) {
    StoredCell c;
    c.config = normalised(row.config_json);
    c.status = row.status;
    c.error = row.error;
    for (const MetricRow& m : store.cell_metrics(row.id)) {
      c.metrics[m.name] = m.value;
      if (m.name == "score") c.score_unit = m.unit;
    }
    c.predictions_digest = predictions_digest(store.cell_samples(row.id));
    out.push_back(c);
  }
  return out;
}

// +1: higher is better, -1: lower is better, 0: neither (any change is a change).
int direction(const std::string& metric, const std::string& score_unit) {
  if (metric == "score") return score_unit == "perplexity" ? -1 : 1;
  if (metric == "recall" || metric == "agreement_with_full") return 1;
  if (metric == "nll" || metric == "attention_output_error" || metric == "kv_resident_bytes") return -1;
  return 0;
}

// "method @ budget on dataset (model, seed s, {params}; cell <id>)": the cell id (`kvbench
// plan`'s) tells apart cells whose configs differ beyond what the label shows.
std::string describe(const json& config) {
  const json& budget = config.value("budget", json());
  const json params = config.at("dataset").value("params", json::object());
  return config.at("method").value("label", "?") + " @ " +
         (budget.is_null() ? std::string("-") : budget.dump()) + " on " +
         config.at("dataset").value("name", "?") + " (" + config.value("model", "?") + ", seed " +
         config.value("seed", json(0)).dump() + (params.empty() ? "" : ", " + params.dump()) +
         "; cell " + cell_id_of_key(config.dump()) + ")";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

double tolerance(const std::map<std::string, double>& t, const std::string& metric) {
  auto it = t.find(metric);
  if (it != t.end()) return it->second;
  it = t.find("default");
  return it != t.end() ? it->second : 0.0;
}

std::map<std::string, double> read_tolerances(const json& baseline, const std::string& path) {
  std::map<std::string, double> out;
  if (!baseline.contains("tolerances")) return out;
  const json& t = baseline["tolerances"];
  if (!t.is_object()) throw InputError(path + ": $.tolerances: expected an object of numbers");
  for (const auto& [name, value] : t.items()) {
    if (!value.is_number() || value.get<double>() < 0)
      throw InputError(path + ": $.tolerances." + name + ": expected a number >= 0");
    out[name] = value.get<double>();
  }
  return out;
}

// A baseline cell as `kvbench baseline` writes it (what describe and compare_cell read), or an
// InputError naming the field: a hand-edited file never reaches them with another shape.
void check_cell_shape(const json& cell, const std::string& where) {
  const auto fail = [&](const std::string& field, const std::string& expected) {
    throw InputError(where + "." + field + ": expected " + expected);
  };
  const auto check_string = [&](const json& object, const std::string& prefix, const char* key) {
    if (object.contains(key) && !object[key].is_string()) fail(prefix + key, "a string");
  };
  if (!cell.is_object() || !cell.contains("config") || !cell.contains("metrics"))
    throw InputError(where + ": expected an object with \"config\" and \"metrics\"");
  if (!cell["metrics"].is_object()) fail("metrics", "an object of numbers");
  check_string(cell, "", "score_unit");
  check_string(cell, "", "predictions_digest");
  const json& config = cell["config"];
  if (!config.is_object()) fail("config", "an object (a cell's normalised config)");
  for (const char* part : {"dataset", "method"})
    if (!config.contains(part) || !config[part].is_object()) fail(std::string("config.") + part, "an object");
  check_string(config["dataset"], "config.dataset.", "name");
  if (config["dataset"].contains("params") && !config["dataset"]["params"].is_object())
    fail("config.dataset.params", "an object");
  check_string(config["method"], "config.method.", "label");
  check_string(config, "config.", "model");
  if (config.contains("seed") && !config["seed"].is_number_integer()) fail("config.seed", "an integer");
  if (config.contains("budget") && !config["budget"].is_null() && !config["budget"].is_number_integer())
    fail("config.budget", "an integer or null");
}

void compare_cell(const json& expected, const StoredCell& actual,
                  const std::map<std::string, double>& tolerances, const CheckOptions& options,
                  const std::string& where, CheckReport& report) {
  const std::string what = describe(expected.at("config"));
  const std::string unit = expected.value("score_unit", "");
  for (const auto& [name, value] : expected.at("metrics").items()) {
    if (!value.is_number()) throw InputError(where + ".metrics." + name + ": expected a number");
    const double base = value.get<double>();
    auto it = actual.metrics.find(name);
    if (it == actual.metrics.end()) {
      report.regressions.push_back(name + " no longer recorded: " + what);
      continue;
    }
    const double now = it->second, diff = now - base, tol = tolerance(tolerances, name);
    if (std::fabs(diff) <= tol) continue;
    const std::string line = name + ": " + what + ": " + number(base) + " -> " + number(now) +
                             " (" + (diff > 0 ? "+" : "") + number(diff) + ", tolerance " +
                             number(tol) + ")";
    const int d = direction(name, unit);
    if (!std::isfinite(now)) report.regressions.push_back(line + ": not a finite number");
    else if (d == 0) report.changes.push_back(line);
    else if (diff * d < 0) report.regressions.push_back(line);
    else report.improvements.push_back(line);
  }
  if (!options.ignore_predictions && expected.contains("predictions_digest") &&
      expected["predictions_digest"] != actual.predictions_digest)
    report.improvements.push_back("predictions changed: " + what);
}

}  // namespace

bool records_metric(const json& cells, const std::string& metric) {
  for (const json& cell : cells)
    if (cell.is_object() && cell.contains("metrics") && cell["metrics"].is_object() &&
        cell["metrics"].contains(metric))
      return true;
  return false;
}

const std::vector<std::string>& default_baseline_metrics() {
  static const std::vector<std::string> metrics = {
      "score", "attended_mean", "kv_resident_bytes", "recall", "attention_output_error", "nll",
      "agreement_with_full"};
  return metrics;
}

json make_baseline(const ResultStore& store, const std::vector<std::string>& metrics,
                   const std::string& where) {
  json cells = json::array();
  for (const StoredCell& c : stored_cells(store)) {
    if (c.status != "complete") continue;
    json values = json::object();
    for (const std::string& m : metrics) {
      if (!c.metrics.count(m)) continue;
      if (!std::isfinite(c.metrics.at(m)))
        throw InputError(where + ": " + m + " of " + describe(json::parse(c.config)) + " is " +
                         number(c.metrics.at(m)) + ": a baseline records finite numbers");
      values[m] = c.metrics.at(m);
    }
    cells.push_back({{"config", json::parse(c.config)},
                     {"score_unit", c.score_unit},
                     {"metrics", values},
                     {"predictions_digest", c.predictions_digest}});
  }
  // A baseline of nothing would pass every check.
  if (cells.empty()) throw InputError(where + ": no complete cell to record");
  return {{"format", kFormat},
          {"tolerances", {{"default", 0.0}}},
          {"cells", cells}};
}

CheckReport check_baseline(const ResultStore& store, const json& baseline,
                           const std::string& path, const CheckOptions& options) {
  if (!baseline.is_object() || baseline.value("format", "") != kFormat)
    throw InputError(path + ": $.format: expected \"" + std::string(kFormat) + "\"");
  if (!baseline.contains("cells") || !baseline["cells"].is_array())
    throw InputError(path + ": $.cells: expected an array");
  if (baseline["cells"].empty())
    throw InputError(path + ": $.cells: empty (a baseline of no cell would pass every check)");
  for (const auto& [key, value] : baseline.items())
    if (key != "format" && key != "tolerances" && key != "cells")
      throw InputError(path + ": $." + key + ": unknown key (expected format, tolerances, cells)");
  // A tolerance for a metric no cell records (a misspelling) would configure nothing.
  const auto check_recorded = [&](const std::map<std::string, double>& given,
                                  const std::string& where) {
    for (const auto& [name, value] : given)
      if (name != "default" && !records_metric(baseline["cells"], name))
        throw InputError(where + name + ": no cell of " + path + " records that metric");
  };
  std::map<std::string, double> tolerances = read_tolerances(baseline, path);
  check_recorded(tolerances, path + ": $.tolerances.");
  check_recorded(options.tolerances, "--tolerance ");
  for (const auto& [name, value] : options.tolerances) tolerances[name] = value;
  std::map<std::string, StoredCell> actual;
  for (StoredCell& c : stored_cells(store)) actual[c.config] = std::move(c);
  CheckReport report;
  report.improvements_fail = !options.allow_improvements;
  std::map<std::string, bool> seen;
  const json& cells = baseline["cells"];
  for (size_t i = 0; i < cells.size(); ++i) {
    const std::string where = path + ": $.cells[" + std::to_string(i) + "]";
    const json& expected = cells[i];
    check_cell_shape(expected, where);
    const std::string key = expected["config"].dump();
    seen[key] = true;
    auto it = actual.find(key);
    if (it == actual.end() || it->second.status != "complete") {
      report.missing.push_back(describe(expected["config"]) +
                               (it == actual.end() ? std::string(": not in the database")
                                                   : ": " + it->second.status + " " +
                                                         first_line(it->second.error)));
      continue;
    }
    ++report.compared;
    compare_cell(expected, it->second, tolerances, options, where, report);
  }
  for (const auto& [key, cell] : actual)
    if (!seen.count(key) && cell.status == "complete") report.added.push_back(describe(json::parse(key)));
  return report;
}

std::string CheckReport::text() const {
  std::string out;
  for (const auto& r : regressions) out += "REGRESSION " + r + "\n";
  for (const auto& c : changes) out += "CHANGED " + c + "\n";
  for (const auto& c : improvements)
    out += std::string(improvements_fail ? "CHANGED " : "note: changed ") + c + "\n";
  for (const auto& m : missing) out += "MISSING " + m + "\n";
  for (const auto& a : added) out += "note: new cell, not in the baseline: " + a + "\n";
  out += "check: " + std::to_string(compared) + " cells compared, " +
         std::to_string(regressions.size()) + " regressions, " +
         std::to_string(changes.size() + improvements.size()) + " other changes, " +
         std::to_string(missing.size()) + " missing, " +
         std::to_string(added.size()) + " new: " + (passed() ? "PASS" : "FAIL") + "\n";
  if (!changes.empty() || (!improvements.empty() && improvements_fail))
    out += "(an intended change? regenerate the baseline with `kvbench baseline` and commit it "
           "with the change)\n";
  return out;
}

}  // namespace kvb
