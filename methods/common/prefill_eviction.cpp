#include "methods/common/prefill_eviction.h"

#include <algorithm>

#include "methods/common/selection.h"

namespace kvb {

std::vector<int64_t> keep_top_and_tail(LayerKV& kv, int head, const at::Tensor& scores,
                                       int64_t count) {
  const int64_t n = scores.numel();
  std::vector<int64_t> keep = top_k_indices(scores, std::clamp<int64_t>(count, 0, n));
  for (int64_t i = n; i < kv.size(head); ++i) keep.push_back(i);
  kv.keep(head, keep);
  return keep;
}

std::vector<int64_t> PrefillEviction::capacities(int, const at::Tensor& scores) {
  return std::vector<int64_t>(scores.size(0), context_.budget - window());
}

void PrefillEviction::on_prefill(int layer, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, LayerKV& kv) {
  const int64_t L = q.size(1);
  if (L < context_.budget) return;  // prompts shorter than B are not compressed
  at::Tensor scores = score(layer, q, k);  // [Hkv, L - window]
  const std::vector<int64_t> caps = capacities(layer, scores);
  for (int h = 0; h < kv.num_heads(); ++h)
    keep_top_and_tail(kv, h, scores[h], caps[h] - 1);  // -1: the current token's slot
}

}  // namespace kvb
