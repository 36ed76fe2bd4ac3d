// kvbench train-tiny --out DIR --seed S [--recipe FILE]: trains a tiny model (by default
// kvbench-tiny v1) from scratch (training/tiny_trainer.h) on the project's synthetic retrieval tasks and writes a
// Hugging Face folder. The committed models/kvbench-tiny was made this way; its README gives the
// command. --print-recipe writes the built-in recipe, the starting point of a --recipe file.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/json_fields.h"
#include "engine/common/shared_folder.h"
#include "engine/device.h"
#include "training/tiny_trainer.h"

namespace kvb {

void add_train_tiny_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line) {
  struct Options {
    std::string out_dir;
    uint64_t seed = 0;
    int threads = 0, data_threads = 0;
    double scale = 1.0;
    std::string device = "cpu", dtype = "f32", recipe;
    bool print_recipe = false;
    EpisodeSources sources{shared_folder() + "/data/wordlists",
                           shared_folder() + "/data/haystack/PaulGrahamEssays.json"};
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "train-tiny", "Train the embedded tiny retrieval model from scratch on the synthetic tasks "
                    "(about 45-50 minutes on 2 cores) and write it as a Hugging Face folder");
  cmd->add_option("--out", o->out_dir, "Output model folder (must not exist or be empty)");
  cmd->add_option("--recipe", o->recipe, "Recipe JSON: the model's shape, tokenizer, optimiser and "
                  "curriculum (default: kvbench-tiny v1's, see --print-recipe)");
  cmd->add_flag("--print-recipe", o->print_recipe,
                "Write the recipe that would train (after --recipe and --scale) as JSON and exit");
  cmd->add_option("--seed", o->seed, "Seed of the initial weights and of the training data");
  cmd->add_option("--threads", o->threads, "Intra-op threads (0: all cores)")
      ->check(thread_count());
  cmd->add_option("--wordlists", o->sources.wordlist_dir, "Folder with nounlist.txt, adjectivelist.txt, verblist.txt")
      ->capture_default_str();
  cmd->add_option("--haystack", o->sources.haystack_file, "PaulGrahamEssays.json")->capture_default_str();
  cmd->add_option("--device", o->device, "Train on cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", o->dtype,
                  "Compute dtype: f32, or bf16 (mixed precision: fp32 master weights, gradients "
                  "and optimizer; the forward and backward passes in bf16)")
      ->capture_default_str();
  cmd->add_option("--data-threads", o->data_threads,
                  "Host threads building batches ahead of the steps (a GPU trains faster than one "
                  "thread builds long documents); 1 draws the committed model's data, each other "
                  "count its own. Default 0: 1 on the CPU, min(8, cores - 2) on a GPU")
      ->capture_default_str()
      ->check(non_negative("1 on the CPU, min(8, cores - 2) on a GPU"));
  cmd->add_option("--scale", o->scale, "Multiply every phase's step count (e.g. 0.01 for a quick check)")
      ->check(positive());
  out.push_back({cmd, [o, command_line] {
    TinyTrainingOptions options;
    options.recipe = o->recipe.empty() ? default_recipe()
                                       : read_recipe(read_json_file(o->recipe), o->recipe + ": $");
    scale_steps(options.recipe, o->scale);
    if (o->print_recipe) {
      std::cout << recipe_json(options.recipe).dump(2) << "\n";
      return 0;
    }
    if (o->out_dir.empty()) throw InputError("train-tiny: --out DIR is required");
    options.device = parse_device(o->device, "--device");
    options.compute_dtype = parse_dtype(o->dtype, "--dtype");
    if (options.compute_dtype == at::kHalf)  // f16 would need loss scaling, which is not built
      throw InputError("--dtype f16: training takes f32 or bf16");
    check_dtype_on_device(options.compute_dtype, options.device, "--dtype");
    std::error_code ec;
    if (std::filesystem::exists(o->out_dir) && !std::filesystem::is_empty(o->out_dir, ec))
      throw InputError(o->out_dir + ": exists and is not an empty folder; not overwriting it");
    if (!std::filesystem::is_directory(o->sources.wordlist_dir))
      throw InputError("--wordlists " + o->sources.wordlist_dir + ": no such folder (the default is in "
                       "the shared folder: " + shared_folder_hint() + ")");
    if (!std::filesystem::is_regular_file(o->sources.haystack_file))
      throw InputError("--haystack " + o->sources.haystack_file + ": no such file (the default is in "
                       "the shared folder: " + shared_folder_hint() + ")");
    std::cerr << "threads: " << configure_threads(o->threads) << "\n";
    options.out_dir = o->out_dir;
    options.seed = o->seed;
    options.data_threads = o->data_threads > 0 ? o->data_threads
                           : options.device.is_cuda() ? std::clamp(machine_cores() - 2, 1, 8)
                                                      : 1;
    options.sources = o->sources;
    train_tiny_model(options, command_line, std::cerr);
    return 0;
  }});
}

}  // namespace kvb
