#include "methods/common/selection.h"

#include <algorithm>
#include <cmath>

namespace kvb {

at::Tensor group_attention_weights(const at::Tensor& q, const LayerKV& kv, int head) {
  const int64_t g = q.size(0) / kv.num_heads();
  at::Tensor keys = kv.keys(head);                   // [n, d]
  at::Tensor q_group = q.narrow(0, head * g, g);     // [g, d]
  at::Tensor logits = at::matmul(q_group, keys.t()) / std::sqrt(double(kv.head_dim()));  // [g, n]
  return at::softmax(logits.to(at::kFloat), -1).sum(0);  // [n]
}

std::vector<int64_t> top_k_indices(const at::Tensor& scores, int64_t k) {
  const int64_t n = scores.numel();
  std::vector<int64_t> out;
  if (k >= n) {
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  at::Tensor idx = std::get<1>(at::topk(scores.to(at::kFloat), k, /*dim=*/0, /*largest=*/true,
                                        /*sorted=*/false));
  idx = idx.to(at::kCPU).contiguous();
  out.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + k);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvb
