// kvbench show RUN: the provenance and results table of a stored run.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "harness/runner/results_table.h"

namespace kvb {

void add_show_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string run = "last", db;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("show", "Show a stored run: provenance and results table");
  cmd->add_option("run", o->run, "Run id, or \"last\" (default)");
  cmd->add_option("--db", o->db, "Results database (e.g. results/runs/smoke.db)")->required();
  out.push_back({cmd, [o] {
    if (!std::filesystem::exists(o->db)) throw InputError(o->db + ": no such database");
    ResultStore store(o->db);
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
    return 0;
  }});
}

}  // namespace kvb
