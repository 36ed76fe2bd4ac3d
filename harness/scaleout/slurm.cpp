#include "harness/scaleout/slurm.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "engine/common/format.h"

namespace kvb {
namespace {

using json = nlohmann::json;

bool has_control_character(const std::string& v) {
  return std::any_of(v.begin(), v.end(),
                     [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// A value of an #SBATCH line: sbatch splits it at blanks and expands '%' patterns in file
// names, and a newline would start a line of its own; such values are refused, not quoted.
void check_sbatch_value(const std::string& flag, const std::string& value) {
  const bool plain = !has_control_character(value) &&
                     value.find_first_of(" \t\"'\\%") == std::string::npos;
  if (!plain)
    throw InputError(flag + " " + json(value).dump() +
                     ": an #SBATCH value cannot hold blanks, quotes, '\\' or '%'");
}

std::string header(const SlurmOptions& o, const std::string& job_name, const std::string& log,
                   bool resources) {
  check_sbatch_value("--job-name", job_name);
  check_sbatch_value("--chdir (the working directory)", o.workdir);
  check_sbatch_value("--dir", o.script_dir);
  for (const auto& [flag, value] : {std::pair{"--partition", &o.partition},
                                    {"--account", &o.account}, {"--time", &o.time},
                                    {"--mem", &o.mem}})
    check_sbatch_value(flag, *value);
  for (const std::string& extra : o.extra_sbatch)
    if (has_control_character(extra))
      throw InputError("--sbatch-option " + json(extra).dump() + ": a control character");
  for (const std::string* path : {&o.kvbench, &o.merged_db, &o.suite})
    if (has_control_character(*path))
      throw InputError(json(*path).dump() + ": a control character in a path a script names");
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "#SBATCH --job-name=" << job_name << "\n";
  s << "#SBATCH --chdir=" << o.workdir << "\n";
  s << "#SBATCH --output=" << o.script_dir << "/logs/" << log << "\n";
  s << "#SBATCH --ntasks=1\n";
  s << "#SBATCH --cpus-per-task=" << (resources ? o.cpus_per_task : 1) << "\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << o.partition << "\n";
  if (!o.account.empty()) s << "#SBATCH --account=" << o.account << "\n";
  if (!o.time.empty()) s << "#SBATCH --time=" << o.time << "\n";
  if (resources && !o.mem.empty()) s << "#SBATCH --mem=" << o.mem << "\n";
  if (resources && o.gpus_per_task) s << "#SBATCH --gpus-per-task=" << *o.gpus_per_task << "\n";
  for (const std::string& extra : o.extra_sbatch) s << "#SBATCH " << extra << "\n";
  return s.str();
}

std::string set_args(const SlurmOptions& o) { return set_flags(o.overrides); }

}  // namespace

std::string set_flags(const std::vector<std::string>& overrides) {
  std::string out;
  for (const std::string& v : overrides) out += " --set " + shell_quote(v);
  return out;
}

std::string shard_db_path(const SlurmOptions& o, int shard) {
  const std::filesystem::path merged(o.merged_db);
  const std::string name = o.suite_name + ".shard-" + std::to_string(shard) + "-of-" +
                           std::to_string(o.shards) + ".db";
  return (merged.parent_path() / name).string();
}

std::string array_script(const SlurmOptions& o) {
  std::ostringstream s;
  s << header(o, o.job_name, o.suite_name + "-shard-%a-job-%A.out", true);
  s << "#SBATCH --array=0-" << (o.shards - 1) << "\n";
  s << "# One array task per shard of suite " << o.suite_name << " (" << o.shards
    << " shards, 0-based): task i runs `kvbench run --shard i/" << o.shards << "` into its own\n"
    << "# database. Resubmitting a task resumes its shard (complete cells are skipped):\n"
    << "#   sbatch --array=i " << o.script_dir << "/" << o.suite_name << ".array.sbatch\n";
  s << "set -euo pipefail\n";
  s << "shard=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch: it is a job array}\n";
  const std::string dir = std::filesystem::path(o.merged_db).parent_path().string();
  s << "db=" << shell_quote((dir.empty() ? "" : dir + "/") + o.suite_name + ".shard-")
    << "\"${shard}\"" << shell_quote("-of-" + std::to_string(o.shards) + ".db") << "\n";
  s << "echo \"kvbench: shard ${shard}/" << o.shards << " of " << o.suite_name
    << " on $(hostname), job ${SLURM_ARRAY_JOB_ID:-?}_${shard} -> ${db}\" >&2\n";
  s << "exec " << shell_quote(o.kvbench) << " run " << shell_quote(o.suite) << set_args(o)
    << " --shard \"${shard}/" << o.shards << "\" --db \"${db}\" --threads "
    << o.cpus_per_task << (o.redo_changed_models ? " --redo-changed-models" : "") << "\n";
  return s.str();
}

std::string merge_script(const SlurmOptions& o) {
  std::ostringstream s;
  s << header(o, o.job_name + "-merge", o.suite_name + "-merge-job-%j.out", false);
  s << "# Merges the shard databases of suite " << o.suite_name << " into " << o.merged_db
    << " once the array job is over\n# (submitted with --dependency=afterany:<array job>); "
       "fails, listing them, if cells are missing.\n";
  s << "set -euo pipefail\n";
  s << "exec " << shell_quote(o.kvbench) << " merge " << shell_quote(o.merged_db);
  for (int i = 0; i < o.shards; ++i) s << " \\\n    " << shell_quote(shard_db_path(o, i));
  s << " \\\n    --skip-missing --suite " << shell_quote(o.suite) << set_args(o) << "\n";
  return s.str();
}

}  // namespace kvb
