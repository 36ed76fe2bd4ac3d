// kvbench show RUN: the provenance and results table of a stored run.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/json_fields.h"
#include "harness/runner/results_table.h"
#include "harness/runner/run_cells.h"
#include "harness/store/result_store.h"

namespace kvb {

using nlohmann::json;

void add_show_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string run = "last", db;
    bool config = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("show", "Show a stored run: provenance and results table");
  cmd->add_option("run", o->run, "Run id, or \"last\" (default)");
  cmd->add_option("--db", o->db, "Results database (e.g. results/runs/smoke.db)")->required();
  cmd->add_flag("--config", o->config,
                "Also print the run's suite JSON (with its --set overrides) and each cell's "
                "normalised config JSON, as stored");
  out.push_back({cmd, [o] {
    require_results_database(o->db);
    ResultStore store(o->db, ResultStore::Access::read);
    int64_t run_id = 0;
    if (o->run == "last") {
      auto latest = store.latest_run();
      if (!latest) throw InputError(o->db + ": holds no runs");
      run_id = *latest;
    } else {
      try {
        size_t used = 0;
        run_id = std::stoll(o->run, &used);
        if (used != o->run.size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        throw InputError("show: run \"" + o->run + "\" is not a run id or \"last\"");
      }
    }
    print_run(store, run_id, std::cout);
    if (o->config) {
      std::cout << "\nsuite JSON:\n" << indented_json(store.run_info(run_id).suite_json)
                << "\n\ncell configs:\n";
      for (const CellRow& cell : run_cells(store, run_id).rows)
        std::cout << cell.id << "  " << cell.config_json << "\n";
    }
    return 0;
  }});
}

}  // namespace kvb
