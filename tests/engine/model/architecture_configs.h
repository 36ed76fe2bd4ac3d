// Tiny configs of the non-Llama architectures the engine runs (what random-tiny lacks: Qwen3's
// explicit head_dim, q/k norms and optional q/k/v/o biases; GLM-4's biases and partial,
// interleaved RoPE), for tests that build them with LlamaModel::random.
#pragma once

#include "engine/model/llama_model.h"

namespace kvb::test {

inline ModelConfig qwen3_config(bool bias) {
  ModelConfig c = llama_config({.layers = 2, .hidden = 32, .ffn = 48, .heads = 4, .kv_heads = 2,
                                .head_dim = 12, .vocab = 260, .rope_theta = 1e6});
  c.model_type = "qwen3";  // head_dim 12 != 32 / 4: the explicit head_dim is what counts
  c.attention_bias = c.output_bias = bias;
  c.rms_norm_eps = 1e-6;
  return c;
}

inline ModelConfig glm_config() {
  ModelConfig c = llama_config({.layers = 2, .hidden = 32, .ffn = 40, .heads = 4, .kv_heads = 2,
                                .head_dim = 16, .vocab = 260, .rope_theta = 500.0, .tied = false});
  c.model_type = "glm";
  c.attention_bias = true;
  c.partial_rotary_factor = 0.5;
  c.rms_norm_eps = 1.5625e-07;
  return c;
}

}  // namespace kvb::test
