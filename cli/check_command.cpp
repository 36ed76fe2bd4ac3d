// kvbench baseline --db DB --out FILE: writes a baseline of every complete cell.
// kvbench check --db DB --baseline FILE: compares a database with a baseline; exit 1 listing
// each regression, change or missing cell.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/json_fields.h"
#include "reports/baseline.h"

namespace kvb {
namespace {

// "score=0.5" -> {"score", 0.5}
std::pair<std::string, double> parse_tolerance(const std::string& text) {
  const size_t eq = text.find('=');
  try {
    size_t used = 0;
    if (eq == std::string::npos || eq == 0) throw std::invalid_argument("no =");
    const double v = std::stod(text.substr(eq + 1), &used);
    if (used != text.size() - eq - 1 || !(v >= 0)) throw std::invalid_argument("bad number");
    return {text.substr(0, eq), v};
  } catch (const std::exception&) {
    throw InputError("--tolerance " + text + ": expected METRIC=NUMBER (>= 0), e.g. score=0.5");
  }
}

void add_baseline(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string db, file;
    std::vector<std::string> metrics = default_baseline_metrics();
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("baseline", "Write a baseline (for `kvbench check`) of "
                                                 "every complete cell in a database");
  cmd->add_option("--db", o->db, "Results database")->required();
  cmd->add_option("--out", o->file, "Baseline JSON to write (e.g. results/baselines/smoke.json)")
      ->required();
  CLI::Option* metrics_given =
      cmd->add_option("--metrics", o->metrics, "Cell metrics to record, where a cell has them")
          ->capture_default_str()
          ->delimiter(',');
  out.push_back({cmd, [o, metrics_given] {
    require_results_database(o->db);
    ResultStore store(o->db, ResultStore::Access::read);
    const json baseline = make_baseline(store, o->metrics, o->db);
    if (metrics_given->count() > 0)  // a misspelt name would record nothing, and check nothing
      for (const std::string& m : o->metrics)
        if (!records_metric(baseline["cells"], m))
          throw InputError("--metrics " + m + ": no complete cell of " + o->db + " has it");
    const std::filesystem::path parent = std::filesystem::path(o->file).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    write_file_atomically(o->file, baseline.dump(2) + "\n");
    std::cout << o->file << ": " << baseline["cells"].size() << " cells\n";
    return 0;
  }});
}

void add_check(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string db, file;
    std::vector<std::string> tolerances;
    bool allow_improvements = false, ignore_predictions = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Compare a database with a committed baseline; exit 1 on any regression, change "
               "or missing cell (listed one a line)");
  cmd->add_option("--db", o->db, "Results database")->required();
  cmd->add_option("--baseline", o->file, "Baseline JSON (results/baselines/*.json)")->required();
  cmd->add_option("--tolerance", o->tolerances,
                  "Absolute tolerance of a metric, METRIC=NUMBER (\"default\" for the rest); "
                  "overrides the baseline's \"tolerances\" (default 0: exact). Repeatable");
  cmd->add_flag("--allow-improvements", o->allow_improvements,
                "Better values and changed predictions are notes, not failures");
  cmd->add_flag("--ignore-predictions", o->ignore_predictions,
                "Do not compare the digest of the generated texts");
  out.push_back({cmd, [o] {
    require_results_database(o->db);
    const json baseline = read_json_file(o->file);
    ResultStore store(o->db, ResultStore::Access::read);
    CheckOptions options;
    for (const std::string& t : o->tolerances) options.tolerances.insert(parse_tolerance(t));
    options.allow_improvements = o->allow_improvements;
    options.ignore_predictions = o->ignore_predictions;
    const CheckReport report = check_baseline(store, baseline, o->file, options);
    std::cout << report.text();
    return report.passed() ? 0 : 1;
  }});
}

}  // namespace

void add_check_commands(CLI::App& app, std::vector<Command>& out) {
  add_baseline(app, out);
  add_check(app, out);
}

}  // namespace kvb
