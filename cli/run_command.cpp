// kvbench run SUITE: runs a suite's cells into a results database and prints the table.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "engine/device.h"
#include "harness/runner/results_table.h"
#include "harness/runner/runner.h"
#include "harness/runner/stop_signals.h"
#include "harness/scaleout/workers.h"

namespace kvb {

namespace {

// What `kvbench run` was given.
struct RunArguments {
  std::string suite, db, shard;
  std::vector<std::string> overrides;
  bool fresh = false, allow_unknown_config_keys = false, cuda_graphs = false;
  bool redo_changed_models = false;
  int threads = 0;
  std::string device, dtype, cache_dir, devices;
  int workers = 1;
  int64_t worker_of_run = 0;  // set by a --workers supervisor for its workers (hidden)
};

// The `kvbench run` arguments of each of `o.workers` workers of run `run_id`: the same run
// without --workers, --devices and --fresh, on its share of the cores.
std::vector<std::string> worker_arguments(const RunArguments& o, const std::string& db,
                                          int64_t run_id) {
  std::vector<std::string> args = {"run", o.suite, "--db", db, "--worker-of-run",
                                   std::to_string(run_id)};
  for (const std::string& s : o.overrides) args.insert(args.end(), {"--set", s});
  if (!o.device.empty()) args.insert(args.end(), {"--device", o.device});
  if (!o.dtype.empty()) args.insert(args.end(), {"--dtype", o.dtype});
  if (!o.cache_dir.empty()) args.insert(args.end(), {"--cache-dir", o.cache_dir});
  if (!o.shard.empty()) args.insert(args.end(), {"--shard", o.shard});
  if (o.allow_unknown_config_keys) args.push_back("--allow-unknown-config-keys");
  if (o.cuda_graphs) args.push_back("--cuda-graphs");
  args.insert(args.end(), {"--threads", std::to_string(o.threads)});
  return args;
}

// The GPUs of the workers with --device cuda, after checking here that each exists (exit 2
// before any worker starts); none without --device cuda.
struct WorkerGpus {
  std::vector<std::string> here;     // as this process numbers them ("cuda:<here>")
  std::vector<std::string> visible;  // as each worker's CUDA_VISIBLE_DEVICES names them
};
WorkerGpus worker_gpus_of(const RunArguments& o) {
  if (o.device != "cuda") {
    if (!o.devices.empty())
      throw InputError("--devices: needs --device cuda (each worker then uses one of them)");
    return {};
  }
  WorkerGpus gpus{.here = worker_gpus(o.workers, o.devices, nullptr),
                  .visible = worker_gpus(o.workers, o.devices, std::getenv("CUDA_VISIBLE_DEVICES"))};
  for (const std::string& gpu : gpus.here) parse_device("cuda:" + gpu, "--devices");
  return gpus;
}

// `kvbench run --workers N`: begins one run, has N worker processes (this executable) share
// its cells through the store's claims, shows their progress as one, prints the table once.
// Returns 0, 1 where a cell failed, or a larger exit code of a worker (one ended by a stop
// this process was asked for aside); a stop that left cells undone ends this process by it.
int run_workers(RunArguments o, const Suite& suite, const RunOptions& options) {
  const WorkerGpus gpus = worker_gpus_of(o);
  if (o.threads <= 0) o.threads = std::max(1, machine_cores() / o.workers);
  const std::vector<Cell> cells =
      options.shard ? cells_of_shard(suite.cells(), *options.shard) : suite.cells();
  RunInfo info = current_run_info(suite, cells, options.command, o.threads);
  if (!gpus.here.empty()) {  // the provenance names each worker's GPU
    info.device.clear();
    for (int i = 0; i < o.workers; ++i)
      info.device += (i ? "; " : "") + std::string("worker ") + std::to_string(i) + ": " +
                     describe_device(parse_device("cuda:" + gpus.here[i], "--devices"));
  }
  ResultStore store(options.db_path);
  if (options.fresh) forget_for_fresh(store, suite, std::cerr);  // once, here
  ModelFingerprints fingerprints;
  settle_changed_models(store, cells, options.redo_changed_models, fingerprints, std::cerr);
  const int64_t run = store.begin_run(info);
  std::vector<WorkerLaunch> launches;
  for (int i = 0; i < o.workers; ++i)
    launches.push_back(WorkerLaunch{.args = worker_arguments(o, options.db_path, run),
                                    .visible_gpu = gpus.visible.empty() ? "" : gpus.visible[i]});
  std::cerr << "suite " << suite.name << ": " << cells.size() << " cells -> " << options.db_path
            << " (" << o.workers << " workers, " << o.threads
            << (o.threads == 1 ? " thread" : " threads") << " each";
  if (!gpus.visible.empty()) std::cerr << ", one GPU each";
  std::cerr << ")\n";
  Progress progress(std::cerr, int(cells.size()), options.progress, o.workers);
  // Ctrl-C reaches the workers too (one process group), a stop sent to this process alone is
  // passed on to them (supervise_workers); each stops before its next sample, and this process
  // waits for them.
  const StopSignals stop;
  const WorkersOutcome outcome = supervise_workers("/proc/self/exe", launches, progress, std::cerr);
  const bool undone = std::any_of(cells.begin(), cells.end(), [&](const Cell& c) {
    return !store.cell_complete(c.key(), fingerprints.of(c.model));
  });
  const int stopped_by = undone ? StopSignals::requested() : 0;
  // This run's cells (its shard's), each by its rows under its key.
  int ran = 0, complete_before = 0, failed = 0;
  std::set<std::string> counted;  // a key once (an axis value listed twice is one cell)
  for (const Cell& cell : cells) {
    if (!counted.insert(cell.key()).second) continue;
    bool complete = false, ran_here = false, failed_here = false;
    for (const CellRow& row : store.cells_with_config(cell.key())) {
      complete |= row.status == "complete";
      ran_here |= row.status == "complete" && row.run_id == run;
      failed_here |= row.status == "failed" && row.run_id == run;
    }
    if (ran_here) ++ran;
    else if (complete) ++complete_before;
    else if (failed_here) ++failed;
  }
  // A worker stopped after every cell was done leaves nothing undone: the run is complete.
  const int exit_code = std::max(outcome.exit_code, failed > 0 ? 1 : 0);
  store.finish_run(run, stopped_by ? "interrupted" : exit_code == 0 ? "complete" : "failures");
  print_run(store, run, std::cout);
  std::cout << "\nrun " << run << ": " << o.workers << " workers";
  if (outcome.replaced > 0) std::cout << " (" << outcome.replaced << " killed and started again)";
  std::cout << ", " << ran << " ran, " << complete_before << " already complete, " << failed
            << " failed; database " << options.db_path << "\n";
  if (stopped_by) finish_stopped(stopped_by);
  return exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line) {

  auto o = std::make_shared<RunArguments>();
  CLI::App* cmd = app.add_subcommand("run", "Run an experiment suite, store results in SQLite, "
                                            "print the results table");
  cmd->add_option("suite", o->suite,
                  "Suite name (a file in suites/, see `kvbench list suites`) or path to "
                  "a suite JSON file")->required();
  cmd->add_option("--db", o->db, "Results database (default: results/runs/<suite>.db); "
                                 "complete cells already in it are skipped");
  cmd->add_option("--set", o->overrides,
                  "Override an axis: model=, dataset=, method=, budget=, seed=, device=, dtype=, "
                  "context_sharing= (comma-separated values, e.g. --set budget=128,256), or "
                  "max_new_tokens=N. "
                  "Repeatable");
  cmd->add_option("--device", o->device, "Run every cell on cpu, cuda or cuda:N (the same as "
                                         "--set device=...; default: the suite's, else cpu)");
  cmd->add_option("--dtype", o->dtype, "Compute dtype of every cell: f32, bf16, f16 (the same "
                                       "as --set dtype=...; default: the suite's, else f32)");
  cmd->add_flag("--fresh", o->fresh, "Forget this suite's earlier results in the database first");
  cmd->add_flag("--redo-changed-models", o->redo_changed_models,
                "Redo the cells whose stored results ran another model under the name the suite "
                "gives it (a checkpoint saved over its folder, another folder at a relative "
                "path), forgetting those results; without it such a run is refused (exit 2)");
  cmd->add_option("--shard", o->shard,
                  "Run only shard i of N (i/N, 0-based: 0/4 .. 3/4), the share `kvbench plan "
                  "SUITE --shards N` shows; default database results/runs/<suite>.shard-i-of-N.db. "
                  "Combine the shards with `kvbench merge`");
  cmd->add_option("--threads", o->threads, "Intra-op CPU threads (default: all cores)")
      ->check(thread_count());
  add_run_cache_dir_option(cmd, o->cache_dir);
  cmd->add_option("--workers", o->workers,
                  "Run N worker processes on this machine sharing the database: each claims the "
                  "next free cell; on the CPU they split the cores, with --device cuda worker i "
                  "uses GPU i (or the i-th of --devices)")
      ->check(positive());
  cmd->add_option("--devices", o->devices,
                  "With --workers and --device cuda: the GPU of each worker, e.g. 0,2,3");
  cmd->add_option("--worker-of-run", o->worker_of_run,
                  "(internal) run as a worker of this run of a --workers supervisor")
      ->group("");
  add_allow_unknown_config_keys_flag(cmd, o->allow_unknown_config_keys);
  add_cuda_graphs_flag(cmd, o->cuda_graphs);
  out.push_back({cmd, [o, command_line] {
    check_cuda_graphs_flag(o->cuda_graphs);
    if (!o->devices.empty() && o->workers <= 1)
      throw InputError("--devices: names the GPU of each worker of --workers N (N > 1)");
    std::vector<std::string> overrides = o->overrides;
    if (!o->device.empty()) parse_device(o->device, "--device");  // usable here?
    if (!o->dtype.empty()) parse_dtype(o->dtype, "--dtype");     // blamed on the flag typed
    if (!o->device.empty()) overrides.push_back("device=" + o->device);
    if (!o->dtype.empty()) overrides.push_back("dtype=" + o->dtype);
    Suite suite = load_suite(o->suite, overrides);  // validated before anything runs
    check_model_configs(suite, o->allow_unknown_config_keys);
    RunOptions options;
    options.allow_unknown_config_keys = o->allow_unknown_config_keys;
    options.cuda_graphs = o->cuda_graphs;
    if (!o->shard.empty()) options.shard = parse_shard_spec(o->shard);
    // A GPU asked for where there is none: exit 2, nothing written (this shard's cells only).
    check_devices(suite, options.shard ? cells_of_shard(suite.cells(), *options.shard)
                                       : suite.cells());
    options.db_path = !o->db.empty() ? o->db
                      : options.shard ? default_shard_db_path(suite.name, *options.shard)
                                      : default_db_path(suite.name);
    options.cache_dir = run_cache_dir(o->cache_dir, options.db_path);
    options.fresh = o->fresh;
    options.redo_changed_models = o->redo_changed_models;
    options.command = command_line;
    options.progress = isatty(STDERR_FILENO) ? Progress::Style::live : Progress::Style::lines;
    { ResultStore opened(options.db_path); }  // a bad database is the one line, before any other
    if (o->workers > 1) return run_workers(*o, suite, options);
    options.threads = configure_threads(o->threads);
    if (o->worker_of_run > 0) {  // a worker: its progress goes to its supervisor as events
      options.join_run = o->worker_of_run;
      options.progress = Progress::Style::events;
      const RunSummary summary = run_suite(suite, options, std::cerr);
      return summary.stopped_by ? 128 + summary.stopped_by : summary.failed > 0 ? 1 : 0;
    }
    std::ostringstream header;
    header << "suite " << suite.name << ": " << suite.cells().size() << " cells";
    if (options.shard)
      header << ", shard " << shard_text(*options.shard) << ": "
             << cells_of_shard(suite.cells(), *options.shard).size() << " of them";
    header << " -> " << options.db_path << " (" << options.threads << " threads)";
    options.header = header.str();
    RunSummary summary = run_suite(suite, options, std::cerr);
    ResultStore store(options.db_path);
    print_run(store, summary.run_id, std::cout);
    std::cout << "\nrun " << summary.run_id << ": " << summary.ran << " ran, " << summary.skipped
              << " already complete, " << summary.failed << " failed";
    if (summary.elsewhere > 0)
      std::cout << ", " << summary.elsewhere << " left to the processes running them";
    std::cout << "; database " << options.db_path << "\n";
    if (summary.stopped_by) finish_stopped(summary.stopped_by);
    return summary.failed > 0 ? 1 : 0;
  }});
}

}  // namespace kvb
