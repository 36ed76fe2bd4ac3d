// kvbench slurm SUITE --shards N: writes an sbatch job array (one task per shard) and a merge
// job depending on it; --submit submits both.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "harness/runner/runner.h"
#include "harness/scaleout/shard.h"
#include "harness/scaleout/slurm.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

void write_script(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw InputError(path + ": cannot write");
  out << text;
  out.close();
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
}

// Runs `command` through the shell; returns its stdout. A non-zero exit is an InputError.
std::string run_capture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw InputError("cannot run: " + command);
  std::string out;
  std::array<char, 256> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (status != 0) throw InputError("`" + command + "` failed (exit status " +
                                    std::to_string(WEXITSTATUS(status)) + ")");
  return out;
}

// `sbatch --parsable` prints "jobid" or "jobid;cluster".
std::string job_id(const std::string& parsable) {
  std::string id;
  for (char c : parsable) {
    if (c == ';' || c == '\n') break;
    id += c;
  }
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw InputError("sbatch printed no job id (got \"" + parsable + "\")");
  return id;
}

// --array's task ids ("1", "0,2", "1-3"): each an existing shard, 0..shards-1, else an
// InputError (sbatch would accept them and the tasks fail).
void check_array_tasks(const std::string& spec, int64_t shards) {
  const std::string expected = "--array " + spec + ": expected task ids of shards 0.." +
                               std::to_string(shards - 1) + " such as 1 or 0,2 or 1-3";
  std::stringstream items(spec);
  std::string item;
  bool any = false;
  while (std::getline(items, item, ',')) {
    const size_t dash = item.find('-');
    const std::string first = item.substr(0, dash);
    const std::string last = dash == std::string::npos ? first : item.substr(dash + 1);
    for (const std::string& id : {first, last})
      if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos ||
          std::stoll(id) >= shards)
        throw InputError(expected);
    if (std::stoll(first) > std::stoll(last)) throw InputError(expected);
    any = true;
  }
  if (!any || spec.back() == ',') throw InputError(expected);
}

// The suite the array tasks run. A task given GPUs runs on cuda where nothing names a device
// (--device, --set device=, the suite's "devices"); a suite on cuda with no GPU per task is
// refused, since every task would fail.
Suite suite_for_tasks(const std::string& suite_arg, std::optional<int> gpus_per_task,
                      std::vector<std::string>& overrides) {
  Suite suite = load_suite(suite_arg, overrides);  // validated before anything
  const bool gpus = gpus_per_task.value_or(0) > 0;
  const auto cuda = std::find_if(suite.devices.begin(), suite.devices.end(),
                                 [](const std::string& d) { return d.rfind("cuda", 0) == 0; });
  if (cuda != suite.devices.end() && !gpus)
    throw InputError("--gpus-per-task: the cells run on " + *cuda +
                     ", but the array tasks get no GPU (add --gpus-per-task N)");
  // "devices" in the suite's JSON after overrides: the file's own, --set device(s)=, --device.
  const bool device_named = suite.source.contains("devices");
  if (!gpus || cuda != suite.devices.end() || device_named) return suite;
  overrides.push_back("device=cuda");
  std::cout << "note: --gpus-per-task: the cells run on cuda (--device cpu keeps them on the "
               "CPU)\n";
  return load_suite(suite_arg, overrides);
}

}  // namespace

void add_slurm_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string suite, db, dir, kvbench, partition, time, account, mem, job_name, array, device,
        sbatch = "sbatch";
    std::vector<std::string> overrides, extra;
    int shards = 0, cpus_per_task = 4;
    std::optional<int> gpus_per_task;
    bool submit = false, redo_changed_models = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "slurm", "Write a Slurm job array running a suite in N shards (task i runs `kvbench run "
               "SUITE --shard i/N`) and a merge job that depends on it; --submit submits them");
  cmd->add_option("suite", o->suite, "Suite name or path to a suite JSON file")->required();
  cmd->add_option("--shards", o->shards, "Number of shards = array tasks")
      ->required()->check(positive());
  cmd->add_option("--partition", o->partition, "Slurm partition (default: the cluster's)");
  cmd->add_option("--gpus-per-task", o->gpus_per_task,
                  "GPUs per array task (default: none); the tasks then run on cuda unless "
                  "--device or the suite says otherwise")
      ->check(non_negative());
  cmd->add_option("--device", o->device, "Run every cell on cpu, cuda or cuda:N (the same as "
                                         "--set device=...; cuda needs --gpus-per-task)");
  cmd->add_option("--time", o->time, "Time limit per task, e.g. 04:00:00 (default: the "
                                     "partition's)");
  cmd->add_option("--cpus-per-task", o->cpus_per_task,
                  "CPUs per array task, also the run's --threads (default 4)")
      ->check(positive());
  cmd->add_option("--mem", o->mem, "Memory per array task, e.g. 16G (default: the partition's)");
  cmd->add_option("--account", o->account, "Slurm account to charge");
  cmd->add_option("--sbatch-option", o->extra,
                  "An extra #SBATCH option for both jobs, verbatim: --sbatch-option=--qos=high. "
                  "Repeatable");
  cmd->add_option("--set", o->overrides, "Override an axis, as in `kvbench run`. Repeatable");
  cmd->add_option("--db", o->db, "Merged database (default results/runs/<suite>.db); the shard "
                                 "databases go beside it as <suite>.shard-i-of-N.db");
  cmd->add_option("--dir", o->dir, "Where the scripts and logs/ go (default "
                                   "results/slurm/<suite>-<N>shards)");
  cmd->add_option("--kvbench", o->kvbench, "kvbench binary the jobs run (default: this one)");
  cmd->add_option("--job-name", o->job_name, "Job name (default kvb-<suite>)");
  cmd->add_flag("--submit", o->submit, "Submit the array and the merge job with sbatch");
  cmd->add_flag("--redo-changed-models", o->redo_changed_models,
                "Each shard's run redoes the cells whose stored results ran another model under "
                "the name the suite gives it (`kvbench run --redo-changed-models`)");
  cmd->add_option("--array", o->array,
                  "With --submit: submit only these array tasks (e.g. 1 or 0,2), to rerun shards "
                  "that failed or were cancelled; a new merge job follows them");
  cmd->add_option("--sbatch", o->sbatch, "sbatch command (default: sbatch on the PATH)");
  out.push_back({cmd, [o] {
    std::vector<std::string> overrides = o->overrides;
    if (!o->device.empty()) overrides.push_back("device=" + o->device);
    const Suite suite = suite_for_tasks(o->suite, o->gpus_per_task, overrides);
    SlurmOptions s;
    s.suite = o->suite;
    s.suite_name = suite.name;
    s.overrides = overrides;
    s.shards = o->shards;
    s.workdir = fs::current_path().string();
    s.kvbench = o->kvbench.empty() ? fs::canonical("/proc/self/exe").string()
                                   : fs::absolute(o->kvbench).string();
    if (!fs::is_regular_file(s.kvbench)) throw InputError("--kvbench " + s.kvbench + ": no such file");
    const std::string dir = o->dir.empty() ? "results/slurm/" + suite.name + "-" +
                                                 std::to_string(o->shards) + "shards"
                                           : o->dir;
    s.script_dir = fs::absolute(dir).lexically_normal().string();
    s.merged_db = o->db.empty() ? default_db_path(suite.name) : o->db;
    s.job_name = o->job_name.empty() ? "kvb-" + suite.name : o->job_name;
    s.partition = o->partition;
    s.time = o->time;
    s.account = o->account;
    s.mem = o->mem;
    s.gpus_per_task = o->gpus_per_task;
    s.cpus_per_task = o->cpus_per_task;
    s.redo_changed_models = o->redo_changed_models;
    s.extra_sbatch = o->extra;
    if (!o->array.empty() && !o->submit) throw InputError("--array: only with --submit");
    if (!o->array.empty()) check_array_tasks(o->array, o->shards);

    fs::create_directories(s.script_dir + "/logs");  // Slurm does not create log folders
    const fs::path merged_dir = fs::path(s.merged_db).parent_path();
    if (!merged_dir.empty()) fs::create_directories(merged_dir);
    const std::string array_path = s.script_dir + "/" + suite.name + ".array.sbatch";
    const std::string merge_path = s.script_dir + "/" + suite.name + ".merge.sbatch";
    write_script(array_path, array_script(s));
    write_script(merge_path, merge_script(s));

    const ShardPlan plan = plan_shards(suite.cells(), o->shards);
    std::cout << "suite " << suite.name << ": " << plan.cells.size() << " cells in "
              << o->shards << " shards (cells per shard:";
    for (int n : plan.shard_cells) std::cout << " " << n;
    std::cout << ")\nwrote " << array_path << "\n      " << merge_path << "\n";
    const std::string array_flag = o->array.empty() ? "" : " --array=" + o->array;
    if (!o->submit) {
      std::cout << "submit with:\n  jid=$(" << o->sbatch << " --parsable" << array_flag << " "
                << shell_quote(array_path) << ") && " << o->sbatch
                << " --dependency=afterany:${jid%%;*} " << shell_quote(merge_path)
                << "\n(or rerun this command with --submit)\n";
      return 0;
    }
    const std::string array_job = job_id(run_capture(
        o->sbatch + " --parsable" + array_flag + " " + shell_quote(array_path)));
    const std::string merge_job = job_id(run_capture(
        o->sbatch + " --parsable --dependency=afterany:" + array_job + " " +
        shell_quote(merge_path)));
    std::cout << "submitted array job " << array_job << " (tasks "
              << (o->array.empty() ? "0-" + std::to_string(o->shards - 1) : o->array)
              << ") and merge job " << merge_job << " (after " << array_job << ") -> "
              << s.merged_db << "\n";
    std::cout << "array_job=" << array_job << "\nmerge_job=" << merge_job << "\n";
    return 0;
  }});
}

}  // namespace kvb
