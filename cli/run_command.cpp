// kvbench run SUITE: runs a suite's cells into a results database and prints the table.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/device.h"
#include "harness/runner/results_table.h"
#include "harness/runner/runner.h"

namespace kvb {

void add_run_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line) {
  struct Options {
    std::string suite, db, shard;
    std::vector<std::string> overrides;
    bool fresh = false, allow_unknown_config_keys = false;
    int threads = 0;
    std::string device, dtype, cache_dir;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Run an experiment suite, store results in SQLite, "
                                            "print the results table");
  cmd->add_option("suite", o->suite,
                  "Suite name (a file in suites/, see `kvbench list suites`) or path to "
                  "a suite JSON file")->required();
  cmd->add_option("--db", o->db, "Results database (default: results/runs/<suite>.db); "
                                 "complete cells already in it are skipped");
  cmd->add_option("--set", o->overrides,
                  "Override an axis: model=, dataset=, method=, budget=, seed=, device=, dtype= "
                  "(comma-separated values, e.g. --set budget=128,256), or max_new_tokens=N. "
                  "Repeatable");
  cmd->add_option("--device", o->device, "Run every cell on cpu, cuda or cuda:N (the same as "
                                         "--set device=...; default: the suite's, else cpu)");
  cmd->add_option("--dtype", o->dtype, "Compute dtype of every cell: f32, bf16, f16 (the same "
                                       "as --set dtype=...; default: the suite's, else f32)");
  cmd->add_flag("--fresh", o->fresh, "Forget this suite's earlier results in the database first");
  cmd->add_option("--shard", o->shard,
                  "Run only shard i of N (i/N, 0-based: 0/4 .. 3/4), the share `kvbench plan "
                  "SUITE --shards N` shows; default database results/runs/<suite>.shard-i-of-N.db. "
                  "Combine the shards with `kvbench merge`");
  cmd->add_option("--threads", o->threads, "Intra-op CPU threads (default: all cores)")
      ->check(non_negative("all cores"));
  cmd->add_option("--cache-dir", o->cache_dir,
                  "Where methods keep what they derive from a model and reuse across runs "
                  "(InfiniGen's calibrations; default: kvbench-cache/ beside the database)");
  add_allow_unknown_config_keys_flag(cmd, o->allow_unknown_config_keys);
  out.push_back({cmd, [o, command_line] {
    std::vector<std::string> overrides = o->overrides;
    if (!o->device.empty()) parse_device(o->device, "--device");  // usable here?
    if (!o->device.empty()) overrides.push_back("device=" + o->device);
    if (!o->dtype.empty()) overrides.push_back("dtype=" + o->dtype);
    Suite suite = load_suite(o->suite, overrides);  // validated before anything runs
    check_model_configs(suite, o->allow_unknown_config_keys);
    RunOptions options;
    options.allow_unknown_config_keys = o->allow_unknown_config_keys;
    if (!o->shard.empty()) options.shard = parse_shard_spec(o->shard);
    // A GPU asked for where there is none: exit 2, nothing written (this shard's cells only).
    check_devices(suite, options.shard ? cells_of_shard(suite.cells(), *options.shard)
                                       : suite.cells());
    options.db_path = !o->db.empty() ? o->db
                      : options.shard ? default_shard_db_path(suite.name, *options.shard)
                                      : default_db_path(suite.name);
    options.cache_dir = !o->cache_dir.empty()
                            ? o->cache_dir
                            : (std::filesystem::path(options.db_path).parent_path() /
                               "kvbench-cache").string();
    options.fresh = o->fresh;
    options.threads = configure_threads(o->threads);
    options.command = command_line;
    options.interactive_progress = isatty(STDERR_FILENO);
    std::cerr << "suite " << suite.name << ": " << suite.cells().size() << " cells";
    if (options.shard)
      std::cerr << ", shard " << shard_text(*options.shard) << ": "
                << cells_of_shard(suite.cells(), *options.shard).size() << " of them";
    std::cerr << " -> "
              << options.db_path << " (" << options.threads << " threads)\n";
    RunSummary summary = run_suite(suite, options, std::cerr);
    ResultStore store(options.db_path);
    print_run(store, summary.run_id, std::cout);
    std::cout << "\nrun " << summary.run_id << ": " << summary.ran << " ran, " << summary.skipped
              << " already complete, " << summary.failed << " failed";
    if (summary.elsewhere > 0)
      std::cout << ", " << summary.elsewhere << " left to the processes running them";
    std::cout << "; database " << options.db_path << "\n";
    return summary.failed > 0 ? 1 : 0;
  }});
}

}  // namespace kvb
