#include "engine/model/llama_layers.h"

namespace kvb {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // In fp32 at least (bf16/f16 widened, f64 kept), then back, as transformers' LlamaRMSNorm.
  at::Tensor xf = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

namespace {

// Pairs (i, i + r/2): x * (cos, cos) + (b, a) * (-sin, sin) with a, b the halves of x, which
// is (a cos - b sin, b cos + a sin) bit for bit in 4 ops instead of 7. x: [..., n, r],
// cos/sin: [n, r].
at::Tensor rotate_halves(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor swapped = at::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + swapped * sin;
}

// Pairs (2i, 2i+1). x: [..., n, r], cos/sin: [n, r/2].
at::Tensor rotate_pairs(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor pairs = x.unflatten(-1, {x.size(-1) / 2, 2});  // [..., n, r/2, 2]
  at::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
  return at::stack({a * cos - b * sin, b * cos + a * sin}, -1).flatten(-2);
}

// [..., L, H*d] -> [..., H, L, d]
at::Tensor split_heads(const at::Tensor& x, int64_t heads, int64_t d) {
  return x.unflatten(-1, {heads, d}).transpose(-3, -2);
}

}  // namespace

RopeAngles rope_angles(const LlamaModel& model, const at::Tensor& positions) {
  // [n, r/2]
  at::Tensor angles = positions.to(at::kFloat).unsqueeze(1) * model.inv_freq.unsqueeze(0);
  at::Tensor cos = angles.cos().to(model.dtype()), sin = angles.sin().to(model.dtype());
  if (model.config.has_interleaved_rope()) return {true, cos, sin};
  return {false, at::cat({cos, cos}, -1), at::cat({sin.neg(), sin}, -1)};  // [n, r]
}

at::Tensor apply_rope(const at::Tensor& x, const RopeAngles& angles) {
  // A no-op cast unless x is computed in another dtype than the model's (mixed precision).
  const at::Tensor cos = angles.cos.to(x.scalar_type()), sin = angles.sin.to(x.scalar_type());
  const int64_t r = angles.interleaved ? 2 * cos.size(-1) : cos.size(-1);
  at::Tensor turned = angles.interleaved ? rotate_pairs(x.narrow(-1, 0, r), cos, sin)
                                         : rotate_halves(x.narrow(-1, 0, r), cos, sin);
  if (r == x.size(-1)) return turned;
  return at::cat({turned, x.narrow(-1, r, x.size(-1) - r)}, -1);
}

namespace {

// x @ weight^T + bias. x: [..., D], weight: [N, D] -> [..., N]. A single fp32 row on the CPU (a
// decode step) is a matrix-vector product: at::linear makes it a one-row GEMM, for which
// OpenBLAS packs (copies) the whole weight matrix on every call; that packing was 38% of a CPU
// decode step of an 8-layer model (perf, `kvbench_bench --benchmark_filter=^decode/`).
at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {}) {
  const bool one_row = x.dim() >= 1 && x.numel() == x.size(-1);
  if (!one_row || !x.device().is_cpu() || weight.scalar_type() != at::kFloat)
    return at::linear(x, weight, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  at::Tensor y = at::mv(weight, x.reshape({-1}));  // [N]
  if (bias.defined()) y.add_(bias);
  return y.view(shape);
}

}  // namespace

at::Tensor layer_queries(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                         const RopeAngles& rope) {
  const ModelConfig& c = model.config;
  at::Tensor q = split_heads(project(h, w.wq(), w.bq()), c.num_attention_heads, c.head_dim);
  if (w.q_norm.defined()) q = rms_norm(q, w.q_norm, c.rms_norm_eps);
  return apply_rope(q, rope);
}

LayerQKV layer_qkv(const LlamaModel& model, const LayerWeights& w, const at::Tensor& h,
                   const RopeAngles& rope, RopeFn rotate) {
  const ModelConfig& c = model.config;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  at::Tensor heads = split_heads(project(h, w.w_qkv, w.b_qkv), Hq + 2 * Hkv, c.head_dim);
  at::Tensor qk = heads.narrow(-3, 0, Hq + Hkv);  // [..., Hq + Hkv, L, d]
  if (w.q_norm.defined())
    qk = at::cat({rms_norm(qk.narrow(-3, 0, Hq), w.q_norm, c.rms_norm_eps),
                  rms_norm(qk.narrow(-3, Hq, Hkv), w.k_norm, c.rms_norm_eps)}, -3);
  qk = rotate(qk, rope);  // the queries' and keys' positions are the same: one rotation
  return {qk.narrow(-3, 0, Hq), qk.narrow(-3, Hq, Hkv), heads.narrow(-3, Hq + Hkv, Hkv)};
}

at::Tensor attention_output(const LayerWeights& w, const at::Tensor& attn) {
  return project(attn, w.wo, w.bo);
}

at::Tensor swiglu_mlp(const LayerWeights& w, const at::Tensor& x) {
  at::Tensor gate_up = project(x, w.w_gate_up);  // [..., 2F]
  const int64_t F = gate_up.size(-1) / 2;
  return project(at::silu(gate_up.narrow(-1, 0, F)) * gate_up.narrow(-1, F, F), w.w_down);
}

int64_t attention_score_bytes(const at::Device& device) {
  return device.is_cpu() ? int64_t(64) << 20 : int64_t(1) << 30;
}

at::Tensor output_logits(const LlamaModel& model, const at::Tensor& x) {
  return lm_head_logits(model, rms_norm(x, model.final_norm, model.config.rms_norm_eps));
}

at::Tensor lm_head_logits(const LlamaModel& model, const at::Tensor& normed) {
  return project(normed, model.lm_head);
}

}  // namespace kvb
