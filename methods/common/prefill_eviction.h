// Base of the score-then-evict methods (SnapKV, PyramidKV, Ada-SnapKV, H2O's prefill variant):
// after a layer's prefill, score every prompt key outside the last `window` positions, give
// each KV head a capacity, keep per head its top-capacity keys plus the window. A subclass
// supplies the score and, when not uniform, the capacities.
//
// Budget accounting (the harness's one meaning of B): a decode step attends to what prefill
// kept plus the new token, so prefill keeps B - 1 entries per head on average; the slot of the
// current token is taken from the scored part. These methods do not evict during decoding, so
// step t attends B + t - 1 entries, as in their papers.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "methods/method.h"

namespace kvb {

class PrefillEviction : public Method {
 public:
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  LayerKV& kv) override;

 protected:
  // Observation/recent window always kept (the last `window` prompt positions).
  virtual int64_t window() const = 0;
  // Scores of the prompt keys outside the window: [Hkv, L - window], higher = keep.
  virtual at::Tensor score(int layer, const at::Tensor& q, const at::Tensor& k) = 0;
  // Per KV head, how many scored keys to keep (before the current token's slot is reserved).
  // Default: B - window for every head.
  virtual std::vector<int64_t> capacities(int layer, const at::Tensor& scores);
};

// Keeps, for `head`, the top `count` of `scores` ([n] over logical entries 0..n-1) and every
// entry from `n` on (the window). `count` is clamped to [0, n]. Returns the kept indices.
std::vector<int64_t> keep_top_and_tail(LayerKV& kv, int head, const at::Tensor& scores, int64_t count);

}  // namespace kvb
