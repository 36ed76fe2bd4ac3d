// kvbench merge OUT.db IN1.db IN2.db ...: combines shard databases of one suite.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "harness/scaleout/merge.h"
#include "harness/scaleout/shard.h"

namespace kvb {

void add_merge_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string out, suite;
    std::vector<std::string> inputs, overrides;
    bool skip_missing = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Combine result databases of one suite (e.g. its shards) into OUT.db. Refuses "
               "databases of different suites or schema versions; a cell present in several "
               "inputs is kept once (the complete row, the latest if several)");
  cmd->add_option("out", o->out, "Merged database; if it exists, its cells are merged too")
      ->required();
  cmd->add_option("inputs", o->inputs, "Input databases")->required();
  cmd->add_option("--suite", o->suite,
                  "Also check the merged database holds every cell of this suite complete; "
                  "exit 1 and list the missing cells if not");
  cmd->add_option("--set", o->overrides, "Axis overrides of --suite, as in `kvbench run`");
  cmd->add_flag("--skip-missing", o->skip_missing,
                "Skip inputs that do not exist (e.g. a shard that never started) instead of "
                "failing");
  out.push_back({cmd, [o] {
    std::optional<Suite> suite;
    if (!o->suite.empty()) suite = load_suite(o->suite, o->overrides);
    std::vector<std::string> inputs;
    for (const std::string& in : o->inputs) {
      if (o->skip_missing && !std::filesystem::exists(in)) {
        std::cerr << "merge: skipping " << in << ": no such database\n";
        continue;
      }
      inputs.push_back(in);
    }
    const MergeSummary m =
        merge_databases(o->out, inputs, suite ? std::optional(suite->name) : std::nullopt);
    std::cout << "merged " << m.inputs << " database" << (m.inputs == 1 ? "" : "s")
              << " of suite " << m.suite << " into " << o->out << ": " << m.cells << " cells ("
              << m.complete << " complete), " << m.runs << " runs, " << m.duplicates
              << " duplicate cell rows dropped\n";
    if (!suite) return 0;
    const std::vector<Cell> missing = missing_cells(o->out, *suite);
    if (missing.empty()) {
      std::cout << "all " << suite->cells().size() << " cells of suite " << suite->name
                << " are complete\n";
      return 0;
    }
    std::cout << missing.size() << " cells of suite " << suite->name << " are not complete:\n";
    for (const Cell& c : missing)
      std::cout << "  " << cell_id(c) << "  " << c.method.label << " @ " << c.budget_text()
                << " on " << c.dataset.name << " (" << c.model << ", seed " << c.seed << ")\n";
    return 1;
  }});
}

}  // namespace kvb
