// Slurm job scripts for a sharded suite: an sbatch job array (task i runs shard i/N) and a
// merge job that depends on it. `kvbench slurm` writes and (with --submit) submits them.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kvb {

struct SlurmOptions {
  std::string suite;                   // as given: a built-in name or a path (relative to workdir)
  std::string suite_name;              // the suite's "name"
  std::vector<std::string> overrides;  // --set values, passed on to run and merge
  int shards = 1;
  std::string kvbench;                 // absolute path of the kvbench binary
  std::string workdir;                 // absolute; the jobs run here (relative paths resolve here)
  std::string script_dir;              // absolute; scripts and logs/ go here
  std::string merged_db;               // relative to workdir or absolute
  std::string job_name;
  std::string partition, time, account, mem;
  std::optional<int> gpus_per_task;
  int cpus_per_task = 4;               // also the run's --threads
  bool redo_changed_models = false;    // passed on to each shard's run
  std::vector<std::string> extra_sbatch;  // extra #SBATCH options, verbatim
};

// The shard databases beside the merged one: <dir of merged>/<suite>.shard-<i>-of-<N>.db.
std::string shard_db_path(const SlurmOptions& o, int shard);
std::string array_script(const SlurmOptions& o);
std::string merge_script(const SlurmOptions& o);
// " --set 'a=1,2' --set 'b=x'": the overrides as `kvbench run` flags, quoted for a shell.
std::string set_flags(const std::vector<std::string>& overrides);

}  // namespace kvb
