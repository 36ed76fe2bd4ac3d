// The forward pass the trainer differentiates: the engine's Llama blocks (llama_layers.h) over
// a batch of equal-length sequences with full causal attention, no KV cache and no method
// hooks. Gives the same logits as Session::prefill on each sequence (tested).
#pragma once
#include <ATen/ATen.h>

#include "engine/model/llama_model.h"

namespace kvb {

// ids: [B, L] (int64) -> logits [B, L, V]. Gradients flow into the model's weights when they
// require grad. `doc` [B, L] (optional): a position attends only to earlier positions of the
// same document, so several documents can share one row.
at::Tensor training_logits(const LlamaModel& model, const at::Tensor& ids,
                           const at::Tensor& doc = {});

}  // namespace kvb
