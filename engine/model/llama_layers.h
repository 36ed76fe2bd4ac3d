// The Llama blocks shared by the inference engine (Session) and the trainer
// (training/training_forward): RMSNorm, rotary embedding, the SwiGLU MLP and the output head.
// Plain ATen ops, so they work on any leading batch dimensions and record autograd graphs
// when their inputs require gradients.
#pragma once
#include <ATen/ATen.h>

#include "engine/model/llama_model.h"

namespace kvb {

// x * rsqrt(mean(x^2) + eps) * weight over the last dimension. x: [..., D], weight: [D].
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The cosines and sines of the rotary angles of `positions` in the model's dtype, laid out
// for its pairing: computed once per forward step and shared by every layer's queries and
// keys, not recomputed per layer (on a GPU each op is a kernel launch).
struct RopeAngles {
  bool interleaved = false;  // pairs (2i, 2i+1) (GLM), else (i, i + r/2) (rotate-half)
  at::Tensor cos, sin;       // rotate-half: [n, r] = (cos, cos) and (-sin, sin); else [n, r/2]
};
RopeAngles rope_angles(const LlamaModel& model, const at::Tensor& positions);

// Rotary embedding of the first r = 2 * inv_freq.size(0) dimensions of each head (the rest
// pass unchanged), with Hugging Face's rotate-half pairs or GLM's interleaved ones.
// x: [..., n, d], angles of the n positions.
at::Tensor apply_rope(const at::Tensor& x, const RopeAngles& angles);
// What rotates a layer's queries and keys: apply_rope, or a kernel computing the same bits
// (engine/kernel_adapter.h inference_apply_rope, which the engine passes).
using RopeFn = at::Tensor (*)(const at::Tensor& x, const RopeAngles& angles);

// A layer's queries, keys and values as its architecture computes them: one stacked q/k/v
// projection (+ bias), the per-head RMSNorm of queries and keys (Qwen3), RoPE on both at once.
// h: [..., L, D] (the normalised layer input), rope: the angles of its L positions.
struct LayerQKV {
  at::Tensor q;  // [..., Hq, L, d]
  at::Tensor k;  // [..., Hkv, L, d]
  at::Tensor v;  // [..., Hkv, L, d]
};
LayerQKV layer_qkv(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                   const RopeAngles& rope, RopeFn rotate = apply_rope);
// The queries alone (for a method that predicts attention before the layer runs), the same
// values as layer_qkv's. h: [..., L, D] -> [..., Hq, L, d].
at::Tensor layer_queries(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                         const RopeAngles& rope);
// The attention output projection (+ bias). attn: [..., L, Hq*d] -> [..., L, D].
at::Tensor attention_output(const LayerWeights& w, const at::Tensor& attn);

// down(silu(gate(x)) * up(x)). x: [..., D] -> [..., D].
at::Tensor swiglu_mlp(const LayerWeights& w, const at::Tensor& x);

// The final RMSNorm and the LM head. x: [..., D] -> [..., V].
at::Tensor output_logits(const LlamaModel& model, const at::Tensor& x);
// The LM head alone, over hidden states the final RMSNorm has normalised: [..., D] -> [..., V].
at::Tensor lm_head_logits(const LlamaModel& model, const at::Tensor& normed);

// Bytes of fp32 attention scores a prefill computes at once (query chunks): cache-sized on the
// CPU (64 MiB), few large launches on a GPU (1 GiB).
int64_t attention_score_bytes(const at::Device& device);

}  // namespace kvb
