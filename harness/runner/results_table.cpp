#include "harness/runner/results_table.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "engine/common/format.h"
#include "engine/common/json_fields.h"
#include "engine/model/llama_model.h"
#include "harness/runner/run_cells.h"
#include "harness/suite/suite.h"

namespace kvb {
namespace {

void print_rows(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i)
      line += rows[r][i] + std::string(width[i] - rows[r][i].size() + 2, ' ');
    out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      out << std::string(total - 2, '-') << "\n";
    }
  }
}

// `path` relative to the working directory when it lies below it, else as it is.
std::string display_path(const std::string& path) {
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(
      std::filesystem::current_path());
  return relative.empty() || *relative.begin() == ".." ? path : relative.string();
}

// One line on each built-in trained model of the table, so that a name like kvbench-tiny is
// not a riddle. (Random-weight models get the untrained note instead.)
void print_model_notes(const std::set<std::string>& models, std::ostream& out) {
  if (models.count("kvbench-tiny"))
    out << "\nkvbench-tiny: kvbench's first trained model (v1), a tiny (0.96M-parameter, 4-layer) "
           "Llama that kvbench trained itself on its synthetic retrieval tasks; what it scores "
           "and misses: "
        << display_path(embedded_model_dir() + "/README.md") << "\n";
  if (models.count("kvbench-tiny-v2"))
    out << "\nkvbench-tiny-v2: kvbench's default model, a 3M-parameter, 6-layer Llama that kvbench "
           "trained on a GPU on its synthetic retrieval tasks with documents up to 5k tokens; "
           "what it scores and misses: "
        << display_path(trained_model_dir("kvbench-tiny-v2") + "/README.md") << "\n";
}

// The suite's cells not run here yet (those with a row are in the table; one shown from another
// config of it says so), or why the suite could not be expanded.
void print_not_run(const RunCells& run, std::ostream& out) {
  constexpr size_t kShown = 10;
  if (!run.unexpanded.empty())
    out << "\nnote: the suite cannot be expanded here, so the table shows every cell stored under "
           "its name (other configs of it too): "
        << run.unexpanded << "\n";
  std::vector<std::string> not_run;
  for (const MissingCell& m : run.missing)
    if (m.state == "not run") not_run.push_back(m.description + m.shown_note());
  if (not_run.empty()) return;
  out << "\n" << not_run.size() << " of the suite's " << run.suite_cells << " cells not run yet";
  if (run.stored_otherwise > 0)
    out << " under the configs they expand to here (" << run.stored_otherwise
        << (run.stored_otherwise == 1 ? " row above is" : " rows above are")
        << " stored under another config of its cell: other paths, or an earlier kvbench)";
  out << ":\n";
  for (size_t i = 0; i < not_run.size() && i < kShown; ++i) out << "  " << not_run[i] << "\n";
  if (not_run.size() > kShown) out << "  ... and " << not_run.size() - kShown << " more\n";
}

}  // namespace

void print_run(const ResultStore& store, int64_t run_id, std::ostream& out) {
  for (const auto& field : store.run_fields(run_id))
    out << field.first << ": " << field.second << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"method", "budget", "dataset", "model", "seed", "status", "score", "metric", "n",
       "attended", "agree %", "recall", "KV MiB", "held MiB", "decode ms/tok"}};
  bool untrained = false;
  std::vector<std::string> errors;
  std::set<std::string> models;
  // A resumed run lists the cells other runs computed too: those rows name their run, whose
  // provenance (command, threads, device) may differ from the header's.
  const RunCells run = run_cells(store, run_id);
  const std::vector<CellRow>& cells = run.rows;
  std::map<int64_t, int> from_other_runs;  // run -> cells
  for (const CellRow& cell : cells)
    if (cell.run_id != run_id) ++from_other_runs[cell.run_id];
  if (!from_other_runs.empty()) rows[0].push_back("run");
  for (const CellRow& cell : cells) {
    std::map<std::string, std::pair<double, std::string>> m;
    for (const MetricRow& metric : store.cell_metrics(cell.id))
      m[metric.name] = {metric.value, metric.unit};
    auto value = [&](const std::string& name, int decimals, double scale = 1.0) {
      return m.count(name) ? fixed(m[name].first * scale, decimals) : std::string("-");
    };
    if (m.count("model_trained") && m["model_trained"].first == 0) untrained = true;
    if (cell.status == "failed")  // one line each, the cell named as its row
      errors.push_back(cell.method + " @ " +
                       (cell.budget ? std::to_string(*cell.budget) : std::string("-")) + " on " +
                       cell.dataset + ": " + first_line(cell.error));
    models.insert(cell.model);
    const json config = stored_object(cell.config_json);
    rows.push_back({cell.method, cell.budget ? std::to_string(*cell.budget) : "-",
                    cell.dataset + sharing_suffix(config), cell.model + device_suffix(config),
                    std::to_string(cell.seed), cell.status, value("score", 2),
                    m.count("score") ? m["score"].second : "-", value("samples", 0),
                    value("attended_mean", 1), value("agreement_with_full", 1),
                    value("recall", 3), value("kv_resident_bytes", 3, 1.0 / (1 << 20)),
                    value("kv_used_bytes", 3, 1.0 / (1 << 20)),
                    value("decode_ms_per_token", 3)});
    if (!from_other_runs.empty()) rows.back().push_back(std::to_string(cell.run_id));
  }
  out << "\n";
  print_rows(rows, out);
  for (const auto& [other, count] : from_other_runs)
    out << "\n" << count << (count == 1 ? " cell" : " cells") << " computed by run " << other
        << " (its own provenance: kvbench show " << other << ")\n";
  print_not_run(run, out);
  print_model_notes(models, out);
  if (untrained)
    out << "\nNOTE: cells marked model_trained=0 ran on a random-weight model; their scores "
           "measure nothing but the harness.\n";
  for (const auto& e : errors) out << "error: " << e << "\n";
}

}  // namespace kvb
