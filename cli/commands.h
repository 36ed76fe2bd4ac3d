// The subcommands of the kvbench CLI. Each add_* function declares one subcommand's options
// (with help text) and what it runs.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/usage.h"  // validators with kvbench-style messages

namespace kvb {

struct LlamaModel;

struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the exit code
};

void register_commands(CLI::App& app, const std::string& command_line);
int run_selected_command(const CLI::App& app);

// One per file under cli/.
void add_run_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line);
void add_list_command(CLI::App& app, std::vector<Command>& out);
void add_show_command(CLI::App& app, std::vector<Command>& out);
void add_model_commands(CLI::App& app, std::vector<Command>& out);  // generate, forward
void add_score_command(CLI::App& app, std::vector<Command>& out);   // LongBench pred/ files
void add_plan_command(CLI::App& app, std::vector<Command>& out);    // scale-out: shards
void add_samples_command(CLI::App& app, std::vector<Command>& out); // a suite's prompts
void add_merge_command(CLI::App& app, std::vector<Command>& out);   // scale-out: shard dbs
void add_slurm_command(CLI::App& app, std::vector<Command>& out);   // scale-out: job array
void add_report_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line);
void add_reproduce_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line);
void add_check_commands(CLI::App& app, std::vector<Command>& out);  // check, baseline
void add_train_tiny_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line);
void add_inspect_command(CLI::App& app, std::vector<Command>& out);  // one sequence's attention

// Sets LibTorch's intra-op threads (0: all cores); returns the count in use.
int configure_threads(int requested);

// --allow-unknown-config-keys, shared by the commands that load models.
void add_allow_unknown_config_keys_flag(CLI::App* cmd, bool& flag);
// --cuda-graphs of the commands that decode (run, generate); refused (InputError, exit 2) when
// given to a build that cannot capture CUDA graphs.
void add_cuda_graphs_flag(CLI::App* cmd, bool& flag);
void check_cuda_graphs_flag(bool flag);
// The required --model of a one-off command (generate, forward, inspect), its help naming every
// built-in model.
void add_model_option(CLI::App* cmd, std::string& model);
// --cache-dir of a one-off command (generate, inspect): none unless given.
void add_cache_dir_option(CLI::App* cmd, std::string& dir);
// --cache-dir of the commands that run suites into a database (run, reproduce), and the folder
// it names: the one asked for, else kvbench-cache/ beside the database.
void add_run_cache_dir_option(CLI::App* cmd, std::string& dir);
std::string run_cache_dir(const std::string& asked, const std::string& db_path);

// Shared by the commands that run one sequence (model_commands.cpp: generate, forward; inspect).
// "1,403,407" -> ids; InputError naming --tokens otherwise.
std::vector<int> parse_token_list(const std::string& text);
// An InputError naming --tokens for an id outside the model's vocabulary [0, vocab_size).
void check_token_ids(const std::vector<int>& ids, int64_t vocab_size);
// --device (cpu, cuda, cuda:N) and --dtype (f32, bf16, f16) of the commands that load a model.
struct ComputeOptions {
  std::string device = "cpu", dtype = "f32";
};
void add_compute_options(CLI::App* cmd, ComputeOptions& options);
// A built-in model name or a Hugging Face folder, on `compute.device` in `compute.dtype`;
// unknown config.json keys printed as warnings when allowed.
std::shared_ptr<LlamaModel> load_for_cli(const std::string& reference,
                                         const ComputeOptions& compute,
                                         bool allow_unknown_config_keys);

}  // namespace kvb
