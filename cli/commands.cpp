#include "cli/commands.h"

#include <ATen/Parallel.h>

#include <filesystem>

#include "engine/common/error.h"
#include "engine/common/thread_pools.h"
#include "engine/decode_graphs.h"
#include "engine/model/llama_model.h"

namespace kvb {
namespace {
std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}
}  // namespace

void register_commands(CLI::App& app, const std::string& command_line) {
  add_run_command(app, commands(), command_line);
  add_list_command(app, commands());
  add_show_command(app, commands());
  add_model_commands(app, commands());
  add_score_command(app, commands());
  add_plan_command(app, commands());
  add_samples_command(app, commands());
  add_merge_command(app, commands());
  add_slurm_command(app, commands());
  add_report_command(app, commands(), command_line);
  add_reproduce_command(app, commands(), command_line);
  add_check_commands(app, commands());
  add_train_tiny_command(app, commands(), command_line);
  add_inspect_command(app, commands());
}

int run_selected_command(const CLI::App& app) {
  for (const Command& c : commands())
    if (c.app->parsed()) return c.run();
  return 2;
}

int configure_threads(int requested) {
  // Asked for: both pools. Not: OpenBLAS keeps its own default, which, unlike
  // machine_cores(), respects the process's CPU affinity (taskset, cgroups, Slurm).
  if (requested > 0) return set_cpu_threads(requested);
  at::set_num_threads(machine_cores());
  return at::get_num_threads();
}

void add_allow_unknown_config_keys_flag(CLI::App* cmd, bool& flag) {
  cmd->add_flag("--allow-unknown-config-keys", flag,
                "Run a model whose config.json or tokenizer_config.json has keys kvbench does not "
                "know (normally refused, exit 2); each is printed as a warning and stored in the "
                "run's provenance");
}

void add_cuda_graphs_flag(CLI::App* cmd, bool& flag) {
  cmd->add_flag("--cuda-graphs", flag,
                "On a GPU, replay each layer's dense part of a decode step (projections, MLP, "
                "norms, RoPE) as a CUDA graph, for the methods that allow it (`kvbench list "
                "methods`, graphs: yes); the attention and the method's hooks stay as they are");
}

void check_cuda_graphs_flag(bool flag) {
  if (flag && !DecodeGraphs::available())
    throw InputError("--cuda-graphs: this kvbench is built without its CUDA kernels (a CPU "
                     "LibTorch, or KVBENCH_CUDA off), so it cannot capture CUDA graphs (README: "
                     "On a GPU machine)");
}

void add_model_option(CLI::App* cmd, std::string& model) {
  std::string builtins;
  for (const std::string& name : LlamaModel::builtin_model_names())
    builtins += (builtins.empty() ? "" : ", ") + name;
  cmd->add_option("--model", model, "Model folder (Hugging Face layout) or a built-in: " + builtins)
      ->required();
}

void add_cache_dir_option(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--cache-dir", dir,
                  "Where methods keep what they derive from a model and reuse across runs "
                  "(InfiniGen's calibrations; default: none, derived again each time)");
}

void add_run_cache_dir_option(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--cache-dir", dir,
                  "Where methods keep what they derive from a model and reuse across runs "
                  "(InfiniGen's calibrations; default: kvbench-cache/ beside the database)");
}

std::string run_cache_dir(const std::string& asked, const std::string& db_path) {
  if (!asked.empty()) return asked;
  return (std::filesystem::path(db_path).parent_path() / "kvbench-cache").string();
}

}  // namespace kvb
