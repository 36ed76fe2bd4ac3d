// kvbench plan SUITE --shards N: the suite's cells with their stable ids, estimated costs and
// shards, as `kvbench run SUITE --shard i/N` will split them.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/format.h"
#include "harness/scaleout/shard.h"
#include "harness/scaleout/slurm.h"

namespace kvb {

void add_plan_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string suite, out;
    std::vector<std::string> overrides;
    int shards = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "List a suite's cells with stable ids (12 hex digits of FNV-1a-64 of the normalised "
              "config) and their split into N shards balanced by estimated cost");
  cmd->add_option("suite", o->suite, "Suite name or path to a suite JSON file")->required();
  cmd->add_option("--shards", o->shards,
                  "Number of shards (0-based: `kvbench run SUITE --shard i/N`, i = 0..N-1)")
      ->check(positive());
  cmd->add_option("--set", o->overrides, "Override an axis, as in `kvbench run`. Repeatable");
  cmd->add_flag("--json", o->json, "Print the plan as JSON instead of a table");
  cmd->add_option("--out", o->out, "Write the plan as JSON to this file (the table still prints)");
  out.push_back({cmd, [o] {
    const Suite suite = load_suite(o->suite, o->overrides);
    const ShardPlan plan = plan_shards(suite.cells(), o->shards);
    json j = plan_to_json(plan);
    j["suite"] = suite.name;
    if (!o->out.empty()) write_file_atomically(o->out, j.dump(2) + "\n");
    if (o->json) {
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << "suite " << suite.name << ": " << plan.cells.size() << " cells, " << plan.shards
              << " shard" << (plan.shards == 1 ? "" : "s")
              << " (cost = context tokens x samples)\n\n";
    // Text columns as wide as their longest entry and two spaces (random-llama3-8b ran into
    // the seed at a fixed 14).
    size_t method_w = 8, dataset_w = 9, model_w = 7;
    for (const PlannedCell& p : plan.cells) {
      method_w = std::max(method_w, p.cell.method.label.size() + 2);
      dataset_w = std::max(dataset_w, p.cell.dataset.name.size() + 2);
      model_w = std::max(model_w, p.cell.model.size() + 2);
    }
    const auto w = [](size_t width) { return std::setw(int(width)); };
    std::cout << std::left << std::setw(14) << "id" << std::setw(7) << "shard" << std::setw(12)
              << "cost" << w(method_w) << "method" << std::setw(8) << "budget" << w(dataset_w)
              << "dataset" << w(model_w) << "model" << "seed\n";
    for (const PlannedCell& p : plan.cells)
      std::cout << std::setw(14) << p.id << std::setw(7) << p.shard << std::setw(12) << p.cost
                << w(method_w) << p.cell.method.label << std::setw(8) << p.cell.budget_text()
                << w(dataset_w) << p.cell.dataset.name << w(model_w) << p.cell.model
                << p.cell.seed << "\n";
    std::cout << "\n";
    // The command of each shard names the same --set values: without them it splits other cells.
    const std::string sets = set_flags(o->overrides);
    for (int s = 0; s < plan.shards; ++s)
      std::cout << "shard " << s << "/" << plan.shards << ": " << plan.shard_cells[size_t(s)]
                << " cells, cost " << plan.shard_cost[size_t(s)] << "  (kvbench run "
                << shell_quote(o->suite) << sets << " --shard " << s << "/" << plan.shards << ")\n";
    if (!o->out.empty()) std::cout << "plan written to " << o->out << "\n";
    return 0;
  }});
}

}  // namespace kvb
