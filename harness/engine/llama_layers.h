// The Llama blocks shared by the inference engine (Session) and the trainer
// (training/training_forward): RMSNorm, rotary embedding, the SwiGLU MLP and the output head.
// Plain ATen ops, so they work on any leading batch dimensions and record autograd graphs
// when their inputs require gradients.
#pragma once
#include <ATen/ATen.h>

#include "harness/engine/llama_model.h"

namespace kvb {

// x * rsqrt(mean(x^2) + eps) * weight over the last dimension. x: [..., D], weight: [D].
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// Rotary embedding, Hugging Face rotate-half convention. x: [..., n, d], positions: [n],
// inv_freq: [d/2] (LlamaModel::inv_freq).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq);

// down(silu(gate(x)) * up(x)). x: [..., D] -> [..., D].
at::Tensor swiglu_mlp(const LayerWeights& w, const at::Tensor& x);

// The final RMSNorm and the LM head. x: [..., D] -> [..., V].
at::Tensor output_logits(const LlamaModel& model, const at::Tensor& x);

}  // namespace kvb
