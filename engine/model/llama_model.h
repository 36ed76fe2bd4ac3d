// Weights of a Llama-family decoder (Llama 2/3, Mistral, Qwen2, Qwen3, GLM-4) and how to get them:
// from a Hugging Face folder, or generated from a seed.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb {

struct LayerWeights {
  at::Tensor attn_norm, mlp_norm;  // [D]
  // The q, k and v projections stacked by rows, [(Hq + 2 Hkv) * d, D]: one matrix product per
  // layer instead of three (on a GPU, one kernel launch). b_qkv: [(Hq + 2 Hkv) * d], or
  // undefined when the model has no q/k/v bias. wq() / wk() / wv() are row views of it.
  at::Tensor w_qkv, b_qkv;
  at::Tensor wo;                    // [D, Hq*d]
  at::Tensor bo;                    // [D]; undefined when the model has none
  at::Tensor q_norm, k_norm;        // [d] per-head RMSNorm weights (Qwen3); else undefined
  at::Tensor w_gate_up;             // [2F, D]: gate rows, then up rows (as GLM stores it)
  at::Tensor w_down;                // [D, F]
  int64_t q_rows = 0;               // Hq * d: where w_qkv's key rows start

  int64_t kv_rows() const { return (w_qkv.size(0) - q_rows) / 2; }  // Hkv * d

  at::Tensor wq() const { return w_qkv.narrow(0, 0, q_rows); }           // [Hq*d, D]
  at::Tensor wk() const { return w_qkv.narrow(0, q_rows, kv_rows()); }     // [Hkv*d, D]
  at::Tensor wv() const { return w_qkv.narrow(0, q_rows + kv_rows(), kv_rows()); }
  at::Tensor bq() const { return part(b_qkv, 0, q_rows); }  // undefined without bias
  at::Tensor bk() const { return part(b_qkv, q_rows, kv_rows()); }
  at::Tensor bv() const { return part(b_qkv, q_rows + kv_rows(), kv_rows()); }
  at::Tensor w_gate() const { return w_gate_up.narrow(0, 0, w_gate_up.size(0) / 2); }  // [F, D]
  at::Tensor w_up() const { return w_gate_up.narrow(0, w_gate_up.size(0) / 2, w_gate_up.size(0) / 2); }

  // Every tensor field (undefined ones included), in one fixed order: for code that treats the
  // weights alike (hashing, moving to a device). The stacked fields' bytes come in the order
  // of the separate projections' (q, k, v; gate, up), so a hash over them is the same as over
  // the separate matrices.
  std::array<at::Tensor*, 10> all() { return fields<at::Tensor>(*this); }
  std::array<const at::Tensor*, 10> all() const { return fields<const at::Tensor>(*this); }

 private:
  static at::Tensor part(const at::Tensor& t, int64_t start, int64_t length) {
    return t.defined() ? t.narrow(0, start, length) : t;
  }
  template <typename T, typename Self>
  static std::array<T*, 10> fields(Self& w) {
    return {&w.attn_norm, &w.mlp_norm, &w.w_qkv, &w.wo,  &w.b_qkv,
            &w.w_gate_up, &w.w_down,   &w.bo,    &w.q_norm, &w.k_norm};
  }
};

// How a model folder is read.
struct LoadOptions {
  at::ScalarType dtype = at::kFloat;  // weights are converted to this on load
  at::Device device = at::kCPU;       // and placed here (each tensor straight from the file)
  // Unknown config.json and tokenizer_config.json keys become ModelConfig::unknown_keys and
  // Tokenizer::unknown_config_keys() instead of an InputError.
  bool allow_unknown_config_keys = false;
  // false: config, tokenizer and its files only, every weight tensor left undefined (for
  // commands that only encode text, such as `kvbench samples`; nothing may run such a model).
  bool weights = true;
};

struct LlamaModel {
  ModelConfig config;
  std::shared_ptr<Tokenizer> tokenizer;  // shared by copies made with to()
  nlohmann::json tokenizer_json;    // tokenizer.json the tokenizer was built from
  nlohmann::json tokenizer_config;  // tokenizer_config.json ({} when the folder has none); its
                                    // chat_template replaced by chat_template.jinja's text where
                                    // the folder has that file, as transformers reads it
  std::string chat_template_file = "tokenizer_config.json: chat_template";  // for errors
  std::string source;       // folder path, or the generator's name
  std::string description;  // one line for outputs: what this model is
  bool trained = true;      // false for generated random weights: scores mean nothing
  at::Tensor embed;         // [V, D]
  at::Tensor final_norm;    // [D]
  at::Tensor lm_head;       // [V, D] (the embedding when tied)
  std::vector<LayerWeights> layers;
  at::Tensor inv_freq;  // [rotary_dim/2] RoPE frequencies after rope_scaling

  // One line for each config.json or tokenizer_config.json key let through by
  // LoadOptions::allow_unknown_config_keys (unknown_key_warning).
  std::vector<std::string> unknown_key_warnings() const;

  // Loads config.json, model.safetensors (or the sharded index) and the tokenizer from `dir`.
  static std::shared_ptr<LlamaModel> load(const std::string& dir, const LoadOptions& options = {});
  // Random N(0, 0.02) weights for `config` from `seed`, with a byte-level tokenizer, drawn by
  // a generator of `options.device` (so on the device, no host copy; the same seed gives other
  // values on a GPU than on the CPU) in fp32, then stored as `options.dtype`.
  static std::shared_ptr<LlamaModel> random(const ModelConfig& config, uint64_t seed,
                                            const LoadOptions& options = {});
  // Resolves a suite's model reference: a built-in (builtin_model_names()) or a folder.
  static std::shared_ptr<LlamaModel> from_reference(const std::string& reference,
                                                    const LoadOptions& options = {});
  static bool is_builtin_reference(const std::string& reference);
  // "kvbench-tiny", "kvbench-tiny-v2", "random-tiny", "random-llama3-8b-4layers",
  // "random-llama3-8b".
  static std::vector<std::string> builtin_model_names();
  // The folder `reference` loads from: a trained built-in's (trained_model_dir), the
  // reference itself where it is no built-in name, "" for a model generated from a seed.
  static std::string folder_of(const std::string& reference);

  // A copy with every weight on `device` in `dtype` (RoPE frequencies stay fp32).
  std::shared_ptr<LlamaModel> to(at::Device device, at::ScalarType dtype) const;
  at::Device device() const { return embed.device(); }
  at::ScalarType dtype() const { return embed.scalar_type(); }
};

// Opens the checkpoint of folder `dir` as LlamaModel::load does, without loading a tensor: its
// files and index, each safetensors header (lengths, dtypes, offsets within the file). An
// InputError naming the file where load would refuse them; cheap (a map of each header).
void check_checkpoint_files(const std::string& dir);

// Writes `model` as a Hugging Face folder `dir`: config.json, model.safetensors (or, with
// shards > 1, model-0000i-of-0000N.safetensors plus model.safetensors.index.json),
// tokenizer.json and tokenizer_config.json. Weights are stored as `dtype` (F32, F16 or BF16).
// Everything is written into a temp folder beside `dir`, then renamed into place, so `dir` is
// either complete or untouched; `dir` must not exist or be an empty folder (else InputError).
// `extra_json` adds files (name -> content) to the folder, e.g. a training record.
void save_model(const LlamaModel& model, const std::string& dir, int shards = 1,
                at::ScalarType dtype = at::kFloat,
                const std::map<std::string, nlohmann::json>& extra_json = {});

// A 64-bit hash of the bytes of every weight, in a fixed order (xxHash64's rounds in four
// lanes; llama_model.cpp): identifies the weights (e.g. to key caches derived from them).
// Reads all weights once, copying those on a GPU to the host.
uint64_t weights_hash(const LlamaModel& model);

// The shape of a Llama-layout model; the rest of its config takes Llama's defaults
// (RMSNorm eps 1e-5, BOS 1, EOS 2, no rope scaling).
struct LlamaShape {
  int layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int max_positions = 8192;
  double rope_theta = 10000.0;
  bool tied = true;  // tie_word_embeddings
};
ModelConfig llama_config(const LlamaShape& shape);

// The folder of the embedded trained model: models/kvbench-tiny in the source tree
// ($KVBENCH_TINY_MODEL overrides, e.g. for an installed binary).
std::string embedded_model_dir();
// The folder of a trained built-in model ("kvbench-tiny": embedded_model_dir(); others:
// models/<name> in the source tree).
std::string trained_model_dir(const std::string& name);

// The config of the generated "random-tiny" model (4 layers, GQA 4/2, head_dim 16).
ModelConfig random_tiny_config();
// RoPE inverse frequencies [rotary_dim/2] for the config's rope_theta and rope_scaling.
at::Tensor rope_inverse_frequencies(const ModelConfig& config);

}  // namespace kvb
