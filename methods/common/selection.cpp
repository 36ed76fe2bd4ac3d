#include "methods/common/selection.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/kernel_adapter.h"

namespace kvb {

namespace {

// softmax(q.k / sqrt(d)) summed over the group's query heads, in fp32 whatever the model's
// dtype (a 16-bit product would round near-ties together). q: [..., g, d], keys: [..., n, d]
// -> [..., n].
at::Tensor summed_group_softmax(const at::Tensor& q, const at::Tensor& keys) {
  at::Tensor logits = at::matmul(q.to(at::kFloat), keys.to(at::kFloat).transpose(-1, -2));  // [..., g, n]
  return at::softmax(logits.div_(std::sqrt(double(q.size(-1)))), -1).sum(-2);
}

}  // namespace

at::Tensor group_attention_weights(const at::Tensor& q, const LayerKV& kv, int head) {
  const int64_t g = q.size(0) / kv.num_heads();
  return summed_group_softmax(q.narrow(0, head * g, g), kv.keys(head));  // [g, d], [n, d] -> [n]
}

at::Tensor group_attention_weights(const at::Tensor& q, const LayerKV& kv) {
  const int64_t Hkv = kv.num_heads(), g = q.size(0) / Hkv, n = kv.size(0), d = kv.head_dim();
  if (n > 0 && sparse_attention_supported(q, kv.key_pool(), kv.value_pool(), Hkv)) {
    // The decode attention kernel over every row, for its probabilities alone: K (and V) read
    // in place, one pass, scores in fp32. ATen's way below gathers the keys and widens them to
    // fp32 first: about 480 us a layer at 32k on an H200 (Oracle top-k, 2026-11-30), 71% of
    // its decode step.
    const at::TensorOptions longs = kv.key_pool().options().dtype(at::kLong);
    std::vector<at::Tensor> probs;  // per KV head [g, n], views of one [Hkv, g, n] buffer
    const at::Tensor indptr = at::arange(0, (Hkv + 1) * n, n, longs);  // [Hkv + 1]: n each
    sparse_decode_attention(q, kv.key_pool(), kv.value_pool(), indptr, kv.uniform_rows(),
                            1.0 / std::sqrt(double(d)), &probs, n,
                            std::vector<int64_t>(size_t(Hkv), n));
    return at::cat(probs).view({Hkv, g, n}).sum(1);  // [Hkv, n]
  }
  at::Tensor keys = kv.key_pool().index_select(0, kv.uniform_rows().reshape({-1})).view({Hkv, n, d});
  return summed_group_softmax(q.view({Hkv, g, d}), keys);  // [Hkv, n]
}

std::vector<int64_t> top_k_indices(const at::Tensor& scores, int64_t k) {
  const int64_t n = scores.numel();
  std::vector<int64_t> out;
  if (k >= n) {
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  if (k <= 0) return out;
  // Ties at the k-th score go to the earliest positions, on every device: at::topk leaves
  // their order to the implementation (CPU and CUDA differ), and max pooling (SnapKV,
  // PyramidKV) makes plateaus of equal scores, so the choice among them is common.
  // top_k_ascending keeps that rule (and ranks NaN first, which is refused here).
  const at::Tensor s = scores.to(at::kFloat).reshape({1, n});  // [1, n]
  if (s.isnan().any().item<bool>())
    throw std::invalid_argument("top_k_indices: the scores hold NaN");
  const at::Tensor idx = top_k_ascending(s, k, 0, 0).to(at::kCPU).contiguous();  // [1, k]
  out.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + k);
  return out;
}

}  // namespace kvb
