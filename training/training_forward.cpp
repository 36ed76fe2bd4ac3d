#include "training/training_forward.h"

#include <cmath>
#include <limits>

#include "engine/model/llama_layers.h"

namespace kvb {
namespace {

// True where query i must not see key j: j > i, or j in another document. doc: [B, L] or
// undefined -> [B or 1, 1, 1, L, L] (broadcast over KV heads and groups).
at::Tensor hidden_keys(int64_t L, const at::Tensor& doc, at::Device device) {
  at::Tensor future = at::ones({L, L}, at::TensorOptions(at::kBool).device(device)).triu(1);
  if (!doc.defined()) return future.view({1, 1, 1, L, L});
  at::Tensor other_doc = doc.unsqueeze(2) != doc.unsqueeze(1);  // [B, L, L]
  return (other_doc | future).unsqueeze(1).unsqueeze(1);
}

// Causal grouped-query attention. q: [B, Hq, L, d], k and v: [B, Hkv, L, d] -> [B, L, Hq*d].
// Query head h reads KV head h / g (g = Hq / Hkv), as Hugging Face's repeat_kv.
at::Tensor causal_gqa_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& hidden) {
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), d = q.size(3), Hkv = k.size(1);
  const int64_t g = Hq / Hkv;
  at::Tensor q_grouped = q.reshape({B, Hkv, g * L, d});
  // Scores and softmax in at least fp32 whatever the weights' dtype (as autocast runs softmax).
  at::Tensor scores = at::matmul(q_grouped, k.transpose(-1, -2)).mul(1.0 / std::sqrt(double(d)))
                          .view({B, Hkv, g, L, L});
  scores = scores.to(at::promote_types(scores.scalar_type(), at::kFloat));
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  at::Tensor probs = at::softmax(scores, -1).to(v.scalar_type()).view({B, Hkv, g * L, L});
  at::Tensor out = at::matmul(probs, v).view({B, Hq, L, d});
  return out.transpose(1, 2).reshape({B, L, Hq * d});
}

at::Tensor decoder_layer(const LlamaModel& model, const LayerWeights& w, const at::Tensor& x,
                         const RopeAngles& rope, const at::Tensor& hidden) {
  const ModelConfig& c = model.config;
  at::Tensor h = rms_norm(x, w.attn_norm, c.rms_norm_eps);  // [B, L, D]
  const LayerQKV qkv = layer_qkv(model, w, h, rope);  // q: [B, Hq, L, d], k, v: [B, Hkv, L, d]
  at::Tensor y = x + attention_output(w, causal_gqa_attention(qkv.q, qkv.k, qkv.v, hidden));
  return y + swiglu_mlp(w, rms_norm(y, w.mlp_norm, c.rms_norm_eps));
}

}  // namespace

at::Tensor training_logits(const LlamaModel& model, const at::Tensor& ids, const at::Tensor& doc) {
  const int64_t L = ids.size(1);
  const RopeAngles rope =
      rope_angles(model, at::arange(L, at::TensorOptions(at::kLong).device(ids.device())));
  const at::Tensor hidden = hidden_keys(L, doc, ids.device());
  at::Tensor x = at::embedding(model.embed, ids);  // [B, L, D]
  for (const LayerWeights& w : model.layers) x = decoder_layer(model, w, x, rope, hidden);
  return output_logits(model, x);
}

}  // namespace kvb
