// config.json of a Hugging Face Llama-family checkpoint.
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
};

struct ModelConfig {
  std::string model_type;  // "llama", "mistral", "qwen2"
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
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2 always, Llama when attention_bias=true)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;  // config.json allows an int or a list

  // Parses and validates; throws InputError naming `path` and the field.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& path);
  static ModelConfig load(const std::string& path);  // reads the file, then from_json
  nlohmann::json to_json() const;  // HF field names; from_json(to_json()) round-trips
};

}  // namespace kvb
