#include "harness/engine/llama_layers.h"

namespace kvb {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor variance = x.pow(2).mean(-1, /*keepdim=*/true);
  return x * at::rsqrt(variance + eps) * weight;
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq) {
  at::Tensor angles = positions.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);
  at::Tensor cos = at::cat({angles.cos(), angles.cos()}, -1).to(x.scalar_type());  // [n, d]
  at::Tensor sin = at::cat({angles.sin(), angles.sin()}, -1).to(x.scalar_type());
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

at::Tensor swiglu_mlp(const LayerWeights& w, const at::Tensor& x) {
  at::Tensor gate = at::linear(x, w.w_gate);
  return at::linear(at::silu(gate) * at::linear(x, w.w_up), w.w_down);
}

at::Tensor output_logits(const LlamaModel& model, const at::Tensor& x) {
  return at::linear(rms_norm(x, model.final_norm, model.config.rms_norm_eps), model.lm_head);
}

}  // namespace kvb
