#include "reports/report_data.h"

#include <algorithm>
#include <set>

#include "engine/common/error.h"
#include "engine/common/json_fields.h"
#include "harness/suite/suite.h"

namespace kvb {
namespace {

// "passkey" when all passkey cells share their params, else "passkey (context_length=1024)":
// only the params that differ between cells of one dataset name are named.
std::string dataset_label(const CellData& cell, const std::vector<CellData>& all) {
  std::set<std::string> differing;
  for (const CellData& other : all) {
    if (other.dataset != cell.dataset) continue;
    for (const auto& [key, value] : cell.dataset_params.items())
      if (!other.dataset_params.contains(key) || other.dataset_params[key] != value)
        differing.insert(key);
  }
  if (differing.empty()) return cell.dataset;
  std::string label = cell.dataset + " (";
  for (const std::string& key : differing) {
    const json& v = cell.dataset_params[key];
    label += (label.back() == '(' ? "" : ", ") + key + "=" +
             (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return label + ")";
}

void label_groups(std::vector<CellData>& cells) {
  std::set<std::string> models;
  for (const CellData& c : cells) models.insert(c.model);
  for (CellData& c : cells) {
    c.group = dataset_label(c, cells);
    if (models.size() > 1) c.group += " on " + c.model;
  }
}


CellData load_cell(const ResultStore& store, const CellRow& row) {
  CellData cell;
  const json config = stored_object(row.config_json);
  cell.model = row.model + device_suffix(config);  // a bf16 or GPU run is its own group
  cell.dataset = row.dataset + sharing_suffix(config);  // shared contexts are their own group
  cell.method = row.method;
  cell.budget = row.budget;
  cell.seed = row.seed;
  const json dataset = config.value("dataset", json::object());
  cell.dataset_params = dataset.is_object() ? dataset.value("params", json::object()) : json::object();
  for (const MetricRow& m : store.cell_metrics(row.id)) {
    cell.metrics[m.name] = m.value;
    if (m.name == "score") cell.score_unit = m.unit;
  }
  const std::map<std::string, double> depths = store.sample_metric(row.id, "meta.depth");
  for (const SampleRow& s : store.cell_samples(row.id)) {
    auto depth = depths.find(s.sample_id);
    cell.samples.push_back({s.sample_id, s.score,
                            depth == depths.end() ? std::nullopt : std::optional(depth->second)});
  }
  return cell;
}

// The build and machine fields of run `other`'s provenance that differ from `fields` (the
// reported run's).
std::string differing_provenance(const ResultStore& store,
                                 const std::vector<std::pair<std::string, std::string>>& fields,
                                 int64_t other) {
  std::string out;
  for (const auto& [name, value] : store.run_fields(other)) {
    static const std::set<std::string> compared = {"git commit", "build type", "LibTorch",
                                                   "device", "threads", "host"};
    if (!compared.count(name)) continue;
    const auto mine = std::find_if(fields.begin(), fields.end(),
                                   [&](const auto& f) { return f.first == name; });
    if (mine == fields.end() || mine->second != value)
      out += (out.empty() ? "" : ", ") + name + " `" + value + "`";
  }
  return out;
}

}  // namespace

ReportData load_report_data(const ResultStore& store, std::optional<int64_t> run_id,
                            const std::string& db_path) {
  if (!run_id) run_id = store.latest_run();
  if (!run_id) throw InputError(db_path + ": holds no runs");
  ReportData data;
  data.run_id = *run_id;
  data.provenance = store.run_fields(*run_id);
  const RunInfo info = store.run_info(*run_id);
  data.suite_name = info.suite;
  data.suite_json = info.suite_json;
  data.command = info.command;
  RunCells cells = run_cells(store, *run_id);
  // A resumed or merged run's cells come from other runs too: each of their commands, in the
  // order their cells appear, after this run's own.
  for (const CellRow& row : cells.rows) {
    if (row.status != "complete") continue;
    data.cells.push_back(load_cell(store, row));
    if (row.run_id == *run_id) continue;
    auto other = std::find_if(data.other_runs.begin(), data.other_runs.end(),
                              [&](const OtherRun& r) { return r.id == row.run_id; });
    if (other == data.other_runs.end()) {
      data.command += "\n" + store.run_info(row.run_id).command;
      data.other_runs.push_back({row.run_id, 0, differing_provenance(store, data.provenance, row.run_id)});
      other = data.other_runs.end() - 1;
    }
    ++other->cells;
  }
  label_groups(data.cells);
  data.suite_cells = cells.suite_cells;
  data.missing = std::move(cells.missing);
  data.stored_otherwise = cells.stored_otherwise;
  data.missing_unknown = std::move(cells.unexpanded);
  return data;
}

std::vector<ReportData> per_model(const ReportData& data) {
  std::vector<std::string> models;
  for (const CellData& c : data.cells)
    if (std::find(models.begin(), models.end(), c.model) == models.end()) models.push_back(c.model);
  if (models.size() <= 1) return {data};
  std::vector<ReportData> out;
  for (const std::string& model : models) {
    ReportData one = data;
    one.cells.clear();
    for (const CellData& c : data.cells)
      if (c.model == model) one.cells.push_back(c);
    one.only_model = model;
    out.push_back(std::move(one));
  }
  return out;
}

std::vector<std::string> groups_of(const ReportData& data) {
  std::vector<std::string> out;
  for (const CellData& c : data.cells)
    if (std::find(out.begin(), out.end(), c.group) == out.end()) out.push_back(c.group);
  return out;
}

std::vector<std::string> methods_of(const ReportData& data) {
  std::vector<std::string> reference, budgeted;
  for (const CellData& c : data.cells) {
    auto& list = c.budget ? budgeted : reference;
    if (std::find(list.begin(), list.end(), c.method) == list.end()) list.push_back(c.method);
  }
  reference.insert(reference.end(), budgeted.begin(), budgeted.end());
  return reference;
}

std::vector<int64_t> budgets_of(const ReportData& data) {
  std::set<int64_t> budgets;
  for (const CellData& c : data.cells)
    if (c.budget) budgets.insert(*c.budget);
  return {budgets.begin(), budgets.end()};
}


std::string missing_heading(const ReportData& data) {
  if (!data.missing_unknown.empty())
    return "The suite's cells could not be listed here, so the tables show every complete cell "
           "stored under its name (other configs of it too) and cells it lacks go unnamed: " +
           data.missing_unknown;
  if (data.missing.empty()) return "";
  std::string heading = std::to_string(data.missing.size()) + " of the suite's " +
                        std::to_string(data.suite_cells) +
                        " cells have no complete result in this database (what `kvbench run` "
                        "would still run; shards run elsewhere come in with `kvbench merge`)";
  if (data.stored_otherwise > 0)
    heading += "; " + std::to_string(data.stored_otherwise) +
               (data.stored_otherwise == 1 ? " result" : " results") +
               " in the tables stored under another config of their cell (other paths, e.g. "
               "${SHARED} elsewhere, or an earlier kvbench), so a run here would redo those cells";
  return heading + ":";
}

std::vector<std::string> missing_lines(const ReportData& data) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < data.missing.size() && i < kMissingShown; ++i)
    lines.push_back(data.missing[i].description + ": " + data.missing[i].state +
                    data.missing[i].shown_note());
  if (data.missing.size() > kMissingShown)
    lines.push_back("... and " + std::to_string(data.missing.size() - kMissingShown) +
                    " more (`kvbench plan` lists the suite's cells)");
  return lines;
}

}  // namespace kvb
