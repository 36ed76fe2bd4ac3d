// `kvbench train-tiny`: trains kvbench's tiny models (by default v1, models/kvbench-tiny) from
// scratch on the project's own synthetic retrieval tasks, with LibTorch autograd over the engine's Llama
// blocks, and writes a Hugging Face folder the standard loader reads.
//
// Recipe (../shared/specs/tiny-model-notes.md): a BPE tokenizer learnt from the task texts and
// the essays; N(0, 0.02) init; AdamW with warm-up and cosine decay; a curriculum of phases,
// first copying (repeat documents, dense in induction events) to form the induction circuit,
// then the retrieval tasks packed several per row at growing lengths.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/common/json_fields.h"
#include "engine/model/llama_model.h"
#include "training/retrieval_episodes.h"

namespace kvb {

struct TrainingPhase {
  std::string name;
  EpisodeMix mix;
  int64_t rows = 16;   // sequences per step
  int64_t steps = 100;
};

// What train-tiny trains: the model's shape, the tokenizer, the optimiser and the curriculum.
// `kvbench train-tiny --print-recipe` writes the built-in one (kvbench-tiny v1) as JSON;
// `--recipe FILE` trains another (a bigger model, longer documents) without rebuilding.
struct TrainingRecipe {
  LlamaShape shape{.layers = 4, .hidden = 128, .ffn = 384, .heads = 4, .kv_heads = 2,
                   .head_dim = 32, .vocab = 0, .max_positions = 8192};
  int bpe_merges = 1000;
  double embed_std = 0.1;  // the other matrices: N(0, 0.02)
  double peak_lr = 3e-3, final_lr_fraction = 0.1, weight_decay = 0.0;
  int64_t warmup_steps = 30;
  double clip_norm = 1.0;
  std::vector<TrainingPhase> phases;
};

// kvbench-tiny v1 (models/kvbench-tiny).
TrainingRecipe default_recipe();
// Every phase's steps times `scale`, rounded, at least 1 (train-tiny --scale).
void scale_steps(TrainingRecipe& recipe, double scale);
// A recipe's JSON: {"model": {...}, "bpe_merges": ..., ..., "phases": [{...}]}; reading is
// strict (unknown keys, wrong types, unknown tasks: InputError naming `where` and the field).
json recipe_json(const TrainingRecipe& recipe);
TrainingRecipe read_recipe(const json& j, const std::string& where);

struct TinyTrainingOptions {
  std::string out_dir;
  uint64_t seed = 0;
  EpisodeSources sources;
  TrainingRecipe recipe = default_recipe();
  int64_t log_every = 25;
  // Host threads building batches ahead of the steps (training/batch_stream.h). 1 draws the
  // data the committed kvbench-tiny saw; each count draws its own (deterministic) data.
  int data_threads = 1;
  // Where it trains, and the dtype of the forward and backward passes: kFloat, or kBFloat16 as
  // autocast does it (the fp32 master weights cast to bf16 each step, through autograd, so the
  // gradients and AdamW stay fp32; the loss in fp32). The weights are drawn on the CPU, so a
  // seed gives the same initial model on every device.
  at::Device device = at::kCPU;
  at::ScalarType compute_dtype = at::kFloat;
};

// Trains and saves to options.out_dir (plus training.json: command, seed, phases, wall time,
// the loss curve). Progress goes to `log`. Returns the trained model.
std::shared_ptr<LlamaModel> train_tiny_model(const TinyTrainingOptions& options,
                                             const std::string& command_line, std::ostream& log);

}  // namespace kvb
