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

// Rotary embedding of the first r = 2 * inv_freq.size(0) dimensions of each head (the rest
// pass unchanged). Pairs are (i, i + r/2), Hugging Face's rotate-half convention, or, when
// `interleaved` (GLM), (2i, 2i+1). x: [..., n, d], positions: [n], inv_freq: [r/2].
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq,
                      bool interleaved = false);

// A layer's queries / keys as its architecture computes them: projection (+ bias), the
// per-head RMSNorm (Qwen3), RoPE. h: [..., L, D] (the normalised layer input), positions: [L]
// -> [..., Hq, L, d] / [..., Hkv, L, d].
at::Tensor layer_queries(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                         const at::Tensor& positions);
at::Tensor layer_keys(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                      const at::Tensor& positions);
// h: [..., L, D] -> [..., Hkv, L, d].
at::Tensor layer_values(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h);
// The attention output projection (+ bias). attn: [..., L, Hq*d] -> [..., L, D].
at::Tensor attention_output(const LayerWeights& w, const at::Tensor& attn);

// down(silu(gate(x)) * up(x)). x: [..., D] -> [..., D].
at::Tensor swiglu_mlp(const LayerWeights& w, const at::Tensor& x);

// The final RMSNorm and the LM head. x: [..., D] -> [..., V].
at::Tensor output_logits(const LlamaModel& model, const at::Tensor& x);

// Bytes of fp32 attention scores a prefill computes at once (query chunks): cache-sized on the
// CPU (64 MiB), few large launches on a GPU (1 GiB).
int64_t attention_score_bytes(const at::Device& device);

}  // namespace kvb
