#include "reports/reproduce.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "engine/common/format.h"
#include "engine/common/json_fields.h"
#include "engine/common/nearest_name.h"
#include "reports/tables.h"

namespace kvb {
namespace {

const std::string kReportsDir = KVBENCH_SOURCE_DIR "/reports";

PaperTable load_paper_table(const std::string& paper, const std::string& table) {
  const std::string path = kReportsDir + "/papers/" + paper + ".json";
  const json j = read_json_file(path);
  PaperTable t;
  JsonFields top(j, path + ": $");
  top.require("paper", t.paper);
  top.require("url", t.url);
  top.require("source", t.source);
  const json* tables = top.raw("tables");
  top.finish();
  if (!tables || !tables->contains(table))
    throw InputError(path + ": $.tables: no table \"" + table + "\"");
  JsonFields f((*tables)[table], path + ": $.tables." + table);
  f.require("title", t.title);
  f.require("model", t.model);
  f.require("metric", t.metric);
  f.require("columns", t.columns);
  const json* values = f.raw("values");
  f.finish();
  if (!values || !values->is_object()) throw InputError(f.path("values") + ": expected an object");
  for (const auto& [method, v] : values->items()) {
    if (v.is_number()) {
      t.reference[method] = v.get<double>();
      continue;
    }
    JsonFields row(v, f.path("values") + "." + method);
    for (const std::string& column : t.columns) {
      double value = 0;
      if (row.get(column, value)) t.values[method][column] = value;
    }
    row.finish();
  }
  return t;
}

Claim parse_claim(const json& j, const std::string& where) {
  Claim c;
  JsonFields f(j, where);
  f.require("text", c.text);
  f.require("order", c.order);
  f.get("on_average", c.on_average);
  f.finish();
  if (c.order.size() < 2) throw InputError(f.path("order") + ": name at least two methods");
  return c;
}

void substitute(json& j, const std::map<std::string, std::string>& values) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (const auto& [key, value] : values)
      for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
        s.replace(at, key.size(), value);
    j = s;
  } else if (j.is_structured()) {
    for (auto& item : j) substitute(item, values);
  }
}

// A value source for claims and rows: (method, paper column) -> value.
using Lookup = std::function<std::optional<double>(const std::string&, const std::string&)>;

std::optional<double> mean_over(const Lookup& value, const std::string& method,
                                const std::vector<std::string>& columns) {
  double sum = 0;
  for (const std::string& c : columns) {
    auto v = value(method, c);
    if (!v) return std::nullopt;
    sum += *v;
  }
  return sum / double(columns.size());
}

// How a verdict names a paper column: "128", or "paper budget 128 = our B=32" for our run.
using ScopeName = std::function<std::string(const std::string& column)>;

// "holds", "does not hold (...)" or "not measured (...)".
std::string verdict(const Claim& claim, const Lookup& value, const std::vector<std::string>& columns,
                    bool higher_is_better, const ScopeName& scope_name) {
  const std::vector<std::string> scopes = claim.on_average ? std::vector<std::string>{"mean"} : columns;
  for (const std::string& scope : scopes) {
    const std::string where = claim.on_average ? "the mean over budgets" : scope_name(scope);
    for (size_t i = 0; i + 1 < claim.order.size(); ++i) {
      const std::string &a = claim.order[i], &b = claim.order[i + 1];
      auto va = claim.on_average ? mean_over(value, a, columns) : value(a, scope);
      auto vb = claim.on_average ? mean_over(value, b, columns) : value(b, scope);
      if (!va || !vb) return "not measured (no value for " + (va ? b : a) + " at " + where + ")";
      const bool beats = higher_is_better ? *va > *vb : *va < *vb;
      if (!beats)
        return "does not hold (at " + where + ": " + a + " " + fixed(*va, 3) + ", " + b + " " +
               fixed(*vb, 3) + ")";
    }
  }
  return "holds";
}

// A claim that a reference method (Full) beats compressed ones is not testable in a run where
// compression costs nothing: one where the reference loses to at least half of the compressed
// (method, column) values. A tiny model teacher-forced on essays is such a run: dropping keys
// often lowers its perplexity. Returns why, or "" when the claim is testable.
std::string untestable_reason(const Claim& claim, const Lookup& value,
                              const std::vector<std::string>& columns,
                              const std::vector<std::string>& compressed, bool higher_is_better) {
  const std::string& reference = claim.order.front();
  if (std::find(compressed.begin(), compressed.end(), reference) != compressed.end()) return "";
  int beaten = 0, cells = 0;
  for (const std::string& c : columns) {
    const auto ref = value(reference, c);
    for (const std::string& m : compressed) {
      const auto v = value(m, c);
      if (!ref || !v) continue;
      ++cells;
      if (higher_is_better ? *v > *ref : *v < *ref) ++beaten;
    }
  }
  if (cells == 0 || 2 * beaten < cells) return "";
  return "not testable in this miniature (" + reference + " is beaten in " + std::to_string(beaten) +
         " of " + std::to_string(cells) + " compressed cells here: this model shows no cost of "
         "compression to measure)";
}

// Our summary table of the metric: the average across datasets, or the only dataset's.
std::optional<MetricTable> our_table(const ReportData& ours, const std::string& metric) {
  MetricSpec spec{metric, metric, "", 1.0, 3};
  if (auto avg = average_table(ours, spec)) return avg;
  for (const std::string& g : groups_of(ours))
    if (auto t = group_table(ours, g, spec)) return t;
  return std::nullopt;
}

std::string unit_of(const ReportData& ours, const std::string& metric) {
  if (metric != "score") return metric;
  for (const CellData& c : ours.cells)
    if (!c.score_unit.empty()) return c.score_unit;
  return "score";
}

std::string cell(const std::optional<double>& v, int decimals = 2) {
  return v ? fixed(*v, decimals) : "-";
}

std::optional<double> difference(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *a - *b;
}

}  // namespace

std::vector<std::string> reproduction_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kReportsDir + "/reproductions"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

ReproductionMode parse_reproduction_mode(const json& j, const std::string& where) {
  ReproductionMode m;
  JsonFields f(j, where);
  f.require("description", m.description);
  f.get("comparable", m.comparable);
  const json* budgets = f.raw("budgets");
  const json* suite = f.raw("suite");
  f.finish();
  if (!budgets || !budgets->is_object()) throw InputError(f.path("budgets") + ": expected an object");
  for (const auto& [column, b] : budgets->items()) {
    if (!b.is_number_integer() || b.get<int64_t>() <= 0)
      throw InputError(f.path("budgets") + "." + column + ": expected a positive integer");
    m.budgets[column] = b.get<int64_t>();
  }
  if (!suite || !suite->is_object()) throw InputError(f.path("suite") + ": expected an object");
  // The comparison averages a method's cells into one column per budget: one model's.
  if (!suite->contains("models") || !(*suite)["models"].is_array() ||
      (*suite)["models"].size() != 1)
    throw InputError(f.path("suite") + ".models: expected exactly one model (the comparison "
                     "with the paper's table is of one model's averages)");
  m.suite = *suite;
  return m;
}

Reproduction load_reproduction(const std::string& name) {
  const std::string path = kReportsDir + "/reproductions/" + name + ".json";
  if (!std::filesystem::exists(path)) {
    const std::vector<std::string> known = reproduction_names();  // the folder listed once
    throw InputError("reproduce " + name + ": no such reproduction (known: " + join(known, ", ") +
                     ")" + did_you_mean(name, known));
  }
  const json j = read_json_file(path);
  Reproduction r;
  JsonFields f(j, path + ": $");
  f.require("name", r.name);
  f.require("title", r.title);
  r.metric = "score";
  f.get("metric", r.metric);
  std::string paper, table;
  f.get("paper", paper);
  f.get("table", table);
  const json* claims = f.raw("claims");
  const json* miniature = f.raw("miniature");
  const json* real = f.raw("real");
  f.finish();
  if (!paper.empty()) r.table = load_paper_table(paper, table);
  for (size_t i = 0; claims && i < claims->size(); ++i)
    r.claims.push_back(parse_claim((*claims)[i], f.path("claims") + "[" + std::to_string(i) + "]"));
  if (!miniature) throw InputError(f.path("miniature") + ": missing required field");
  r.miniature = parse_reproduction_mode(*miniature, f.path("miniature"));
  if (real) r.real = parse_reproduction_mode(*real, f.path("real"));
  return r;
}

json reproduction_suite(const Reproduction& r, const ReproductionMode& mode,
                        const Placeholders& values, const std::string& suite_name) {
  json suite = mode.suite;
  substitute(suite, {{"${MODEL}", values.model}, {"${DATA}", values.data}, {"${SHARED}", values.shared}});
  suite["name"] = suite_name;
  std::set<int64_t> budgets;
  for (const auto& [column, b] : mode.budgets) budgets.insert(b);
  suite["budgets"] = std::vector<int64_t>(budgets.begin(), budgets.end());
  return suite;
}

std::string compare_with_paper(const Reproduction& r, const ReproductionMode& mode,
                               const ReportData& all) {
  // The papers measured with the question in the window: only those cells meet them; the
  // drop with the context shared follows the comparison.
  ReportData ours = all;
  ours.cells.erase(std::remove_if(ours.cells.begin(), ours.cells.end(),
                                  [](const CellData& c) {
                                    return c.dataset.find(" (shared context)") !=
                                           std::string::npos;
                                  }),
                   ours.cells.end());
  const std::optional<MetricTable> table = our_table(ours, r.metric);
  const std::string unit = unit_of(ours, r.metric);
  const bool lower_better = lower_is_better(MetricSpec{r.metric, r.metric}, unit);
  std::vector<std::string> columns;
  if (r.table) columns = r.table->columns;
  else for (const auto& [column, b] : mode.budgets) columns.push_back(column);
  if (!r.table)  // a figure's columns: in budget order, not the map's text order
    std::sort(columns.begin(), columns.end(), [&](const std::string& a, const std::string& b) {
      return mode.budgets.at(a) < mode.budgets.at(b);
    });
  Lookup our_value = [&](const std::string& method, const std::string& column) -> std::optional<double> {
    if (!table) return std::nullopt;
    auto b = mode.budgets.find(column);
    const bool reference = table->is_reference(method);  // Full: one value for every column
    if (!reference && b == mode.budgets.end()) return std::nullopt;
    auto s = table->at(method, reference ? MetricTable::kNoBudget : b->second);
    return s ? std::optional<double>(s->mean) : std::nullopt;
  };
  Lookup paper_value = [&](const std::string& method, const std::string& column) -> std::optional<double> {
    if (!r.table) return std::nullopt;
    if (r.table->reference.count(method)) return r.table->reference.at(method);
    auto m = r.table->values.find(method);
    if (m == r.table->values.end() || !m->second.count(column)) return std::nullopt;
    return m->second.at(column);
  };
  // Quality kept relative to Full, in %, so a miniature's numbers can sit beside the paper's
  // (a score of 0 keeps 0%; a lower-is-better value of 0 has no ratio).
  auto of_full = [](const std::optional<double>& v, const std::optional<double>& full, bool lower) {
    if (!v || !full || *full == 0 || (lower && *v == 0)) return std::optional<double>();
    return std::optional<double>(lower ? 100.0 * *full / *v : 100.0 * *v / *full);
  };
  std::string md = "## " + r.title + "\n\n";
  if (r.table)
    md += "Paper: " + r.table->paper + " (" + r.table->url + "), " + r.table->title + ", " +
          r.table->model + "; " + r.table->metric + ".\n\n";
  const size_t datasets = groups_of(ours).size();
  md += "Ours: " + mode.description + " Metric: " + unit + (lower_better ? " (lower is better)" : "") +
        (datasets > 1 ? ", the mean across its " + std::to_string(datasets) + " datasets with results"
                      : ", on its one dataset with results") +
        "; run " + std::to_string(ours.run_id) + ".\n\n";
  // The paper's numbers cover all its datasets and methods; a mean over part of them is not
  // theirs (a dataset whose cells all failed drops out of it).
  if (!all.missing.empty()) {
    const std::string heading = missing_heading(all);
    md += "**Partial: the comparison below leaves out what is missing, where the paper's numbers "
          "cover everything.** " + heading + "\n\n";
    for (const std::string& line : missing_lines(all)) md += "- " + line + "\n";
    md += "\n";
  }
  std::vector<std::string> methods;
  if (r.table) {
    for (const auto& [m, v] : r.table->reference) methods.push_back(m);
    for (const auto& [m, v] : r.table->values) methods.push_back(m);
  }
  for (const std::string& m : methods_of(ours))
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  md += "| method | paper column | our budget | paper | ours | difference | paper % of Full | "
        "ours % of Full | difference (% points) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& m : methods) {
    const bool reference = r.table && r.table->reference.count(m);
    for (const std::string& c : reference ? std::vector<std::string>{"-"} : columns) {
      const auto paper = paper_value(m, c), mine = our_value(m, c);
      const auto paper_rel = of_full(paper, paper_value("full", c), false);
      const auto our_rel = of_full(mine, our_value("full", c), lower_better);
      // Raw values of a miniature (other model, other task) are not comparable with the paper's.
      const std::string raw_diff = mode.comparable ? cell(difference(mine, paper)) : "n/a";
      const auto b = mode.budgets.find(c);
      md += "| " + m + " | " + c + " | " + (b == mode.budgets.end() ? "-" : std::to_string(b->second)) +
            " | " + cell(paper) + " | " + cell(mine, 3) + " | " + raw_diff + " | " +
            cell(paper_rel, 1) + " | " + cell(our_rel, 1) + " | " +
            cell(difference(our_rel, paper_rel), 1) + " |\n";
    }
  }
  if (!r.claims.empty()) md += "\nClaims of the paper:\n\n";
  const ScopeName paper_scope = [](const std::string& column) { return column; };
  const ScopeName our_scope = [&](const std::string& column) {  // both budgets: ours differ
    const auto b = mode.budgets.find(column);
    return b == mode.budgets.end() || std::to_string(b->second) == column
               ? column
               : "paper budget " + column + " = our B=" + std::to_string(b->second);
  };
  std::vector<std::string> compressed;  // our budgeted methods
  for (const std::string& m : methods_of(ours))
    if (table && !table->is_reference(m)) compressed.push_back(m);
  for (const Claim& claim : r.claims) {
    const std::string untestable =
        mode.comparable ? "" : untestable_reason(claim, our_value, columns, compressed, !lower_better);
    md += "- " + claim.text + ": paper " +
          (r.table ? verdict(claim, paper_value, columns, true, paper_scope)
                   : std::string("states it (figure)")) +
          "; ours " +
          (untestable.empty() ? verdict(claim, our_value, columns, !lower_better, our_scope) : untestable) +
          "\n";
  }
  for (const MetricTable& drop : sharing_drop_tables(all))  // --context-sharing (not in the paper)
    md += "\n### " + drop.heading + " (not in the paper)\n\n" + to_markdown(drop);
  return md;
}

}  // namespace kvb
