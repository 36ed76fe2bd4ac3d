// kvbench run SUITE: runs a suite's cells into a results database and prints the table.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "engine/device.h"
#include "harness/runner/results_table.h"
#include "harness/runner/runner.h"

namespace kvb {

namespace {

// What `kvbench run` was given.
struct RunArguments {
  std::string suite, db, shard;
  std::vector<std::string> overrides;
  bool fresh = false, allow_unknown_config_keys = false;
  int threads = 0;
  std::string device, dtype, cache_dir, devices;
  int workers = 1;
};
// Worker i's --device: its own GPU with --device cuda (the i-th of --devices, or GPU i), else
// the run's (possibly none).
std::string worker_device(const RunArguments& o, int i) {
  if (o.device != "cuda") return o.device;
  if (o.devices.empty()) return "cuda:" + std::to_string(i);
  size_t at = 0;
  for (int k = 0; k < i; ++k) at = o.devices.find(',', at) + 1;
  return "cuda:" + o.devices.substr(at, o.devices.find(',', at) - at);
}

// The `kvbench run` arguments of worker `i` of `n`: the same run without --workers and --fresh,
// on its own GPU (with --device cuda) or its share of the cores.
std::vector<std::string> worker_arguments(const RunArguments& o, const std::string& db, int i,
                                          int n) {
  std::vector<std::string> args = {"run", o.suite, "--db", db};
  for (const std::string& s : o.overrides) args.insert(args.end(), {"--set", s});
  if (const std::string device = worker_device(o, i); !device.empty())
    args.insert(args.end(), {"--device", device});
  if (!o.dtype.empty()) args.insert(args.end(), {"--dtype", o.dtype});
  if (!o.cache_dir.empty()) args.insert(args.end(), {"--cache-dir", o.cache_dir});
  if (!o.shard.empty()) args.insert(args.end(), {"--shard", o.shard});
  if (o.allow_unknown_config_keys) args.push_back("--allow-unknown-config-keys");
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / n);
  args.insert(args.end(), {"--threads", std::to_string(threads)});
  return args;
}

// InputError unless --devices names one GPU per worker and comes with --device cuda.
void check_worker_devices(const RunArguments& o) {
  if (o.devices.empty()) return;
  if (o.device != "cuda")
    throw InputError("--devices: needs --device cuda (each worker then uses one of them)");
  const int listed = int(std::count(o.devices.begin(), o.devices.end(), ',')) + 1;
  if (listed != o.workers)
    throw InputError("--devices: " + std::to_string(listed) + " GPUs for " +
                     std::to_string(o.workers) + " workers (give one per worker)");
  for (int i = 0; i < o.workers; ++i)  // each exists here: exit 2 before any worker starts
    parse_device(worker_device(o, i), "--devices");
}

// Runs `o.workers` worker processes (this executable) on one database and waits for them all;
// they share the cells through the store's claims. Returns the largest exit code.
int run_workers(const RunArguments& o, const std::string& db) {
  check_worker_devices(o);
  std::vector<pid_t> pids;
  for (int i = 0; i < o.workers; ++i) {
    const std::vector<std::string> args = worker_arguments(o, db, i, o.workers);
    std::cerr << "worker " << i << ": kvbench";
    for (const std::string& a : args) std::cerr << " " << a;
    std::cerr << "\n";
    const pid_t pid = fork();
    if (pid == 0) {  // the worker: its progress on stderr; the table is printed once, below
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDOUT_FILENO);
      std::vector<char*> argv = {const_cast<char*>("kvbench")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    if (pid < 0) throw std::runtime_error("--workers: cannot start a worker process");
    pids.push_back(pid);
  }
  int worst = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) std::cerr << "worker " << i << ": exit " << code << "\n";
    worst = std::max(worst, code);
  }
  ResultStore store(db);
  if (const std::optional<int64_t> run = store.latest_run()) print_run(store, *run, std::cout);
  std::cout << "\n" << o.workers << " workers; database " << db << "\n";
  return worst;
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
  cmd->add_option("--workers", o->workers,
                  "Run N worker processes on this machine sharing the database: each claims the "
                  "next free cell; on the CPU they split the cores, with --device cuda worker i "
                  "uses GPU i (or the i-th of --devices)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--devices", o->devices,
                  "With --workers and --device cuda: the GPU of each worker, e.g. 0,2,3");
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
    if (o->workers > 1) {
      if (options.fresh) ResultStore(options.db_path).forget_suite(suite.name);  // once, here
      return run_workers(*o, options.db_path);
    }
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
