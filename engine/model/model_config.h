// config.json of a Hugging Face Llama-family checkpoint (Llama 2/3, Mistral, Qwen2, Qwen3,
// GLM-4), written by any transformers version: the rope settings as `rope_parameters`
// (transformers >= 5) or as `rope_theta` + `rope_scaling` (older). Every key of the file is
// either read, known not to change inference (config_key_table()), or refused.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvb {

struct RopeScaling {
  std::string type = "none";  // "none", "linear", "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3 only
  double high_freq_factor = 4.0;  // llama3 only
  int original_max_position_embeddings = 8192;  // llama3 only
  bool operator==(const RopeScaling& o) const;
};

struct ModelConfig {
  std::string model_type;  // "llama", "mistral", "qwen2", "qwen3", "glm"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // hidden_size / num_attention_heads unless config.json sets it
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // RoPE turns only the first partial_rotary_factor * head_dim dimensions of a head (GLM: 0.5).
  double partial_rotary_factor = 1.0;
  // > 0: some layer attends only the last `sliding_window` keys. kvbench does not implement
  // sliding-window attention, so the engine refuses contexts longer than this (where the
  // window would change the result) instead of computing something else.
  int sliding_window = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2 always; GLM by default)
  bool output_bias = false;     // o_proj bias (Llama and Qwen3 when attention_bias is true)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;  // config.json allows an int or a list
  // Keys of the file kvbench does not know, let through by allow_unknown_keys (warnings).
  std::vector<std::string> unknown_keys;

  // Architecture traits, from model_type.
  bool has_qk_norm() const { return model_type == "qwen3"; }         // per-head RMSNorm of q, k
  bool has_interleaved_rope() const { return model_type == "glm"; }  // pairs (2i, 2i+1)
  bool has_fused_gate_up() const { return model_type == "glm"; }     // mlp.gate_up_proj
  int rotary_dim() const;  // dimensions of a head RoPE turns (even)

  // Parses and validates; throws InputError naming `path` and the field. An unknown key is an
  // error unless `allow_unknown_keys`, which lists it in `unknown_keys` instead.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& path,
                               bool allow_unknown_keys = false);
  static ModelConfig load(const std::string& path, bool allow_unknown_keys = false);
  // HF field names in the layout every transformers version reads (rope_theta + rope_scaling);
  // from_json(to_json()) round-trips.
  nlohmann::json to_json() const;
};

// The one-line warning for an unknown key of `config_path` let through by allow_unknown_keys.
std::string unknown_key_warning(const std::string& config_path, const std::string& key);

// The keys config.json may hold: those kvbench reads (their values are implemented or refused)
// and those known not to change greedy inference. Anything else is refused.
struct ConfigKey {
  const char* key;
  bool read;        // false: known not to change inference
  const char* why;  // what kvbench does with it
};
const std::vector<ConfigKey>& config_key_table();

}  // namespace kvb
