// Training data on the host: how fast EpisodeSampler builds batches (one thread), the work a
// GPU training step must not wait for. kvbench-tiny's tokenizer; word lists and essays from the
// shared folder (each benchmark reports an error without it).
//   episode_batch/<recipe>/<phase>   one batch of that phase: rows x length tokens of its mix,
//                                    for the built-in recipe (v1) and training/recipes/*.json
// Counter tokens_per_s (batch tokens / time), beside the phase's rows and length.
// Run: kvbench_bench --benchmark_filter=episode_batch
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "engine/common/json_fields.h"
#include "engine/common/shared_folder.h"
#include "engine/model/llama_model.h"
#include "training/tiny_trainer.h"

namespace kvb {
namespace {

void episode_batch(benchmark::State& state, const TrainingPhase& phase) {
  const std::string shared = shared_folder();
  const EpisodeSources sources{shared + "/data/wordlists",
                               shared + "/data/haystack/PaulGrahamEssays.json"};
  if (!std::filesystem::is_directory(sources.wordlist_dir)) {
    state.SkipWithError(("no word lists at " + sources.wordlist_dir).c_str());
    return;
  }
  static const std::shared_ptr<LlamaModel> model = LlamaModel::from_reference("kvbench-tiny");
  EpisodeSampler sampler(*model->tokenizer, sources, 0);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.batch(phase.mix, phase.rows));
  state.counters["rows"] = double(phase.rows);
  state.counters["length"] = double(phase.mix.length);
  state.counters["tokens_per_s"] = benchmark::Counter(
      double(phase.rows * phase.mix.length), benchmark::Counter::kIsIterationInvariantRate);
}

// The phases of every recipe that draw dataset tasks (copying phases are cheap).
const bool registered = [] {
  std::vector<std::pair<std::string, TrainingRecipe>> recipes = {{"v1", default_recipe()}};
  const std::filesystem::path dir = std::filesystem::path(KVBENCH_SOURCE_DIR) / "training/recipes";
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".json")
        recipes.push_back({entry.path().stem().string(),
                           read_recipe(read_json_file(entry.path().string()), entry.path().string())});
  for (const auto& [name, recipe] : recipes)
    for (const TrainingPhase& phase : recipe.phases) {
      if (phase.mix.task_weights.size() == 1 && phase.mix.task_weights.count("repeat")) continue;
      benchmark::RegisterBenchmark(("episode_batch/" + name + "/" + phase.name).c_str(),
                                   [phase](benchmark::State& s) { episode_batch(s, phase); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  return true;
}();

}  // namespace
}  // namespace kvb
