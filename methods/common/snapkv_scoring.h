// SnapKV's observation-window score, shared by SnapKV, PyramidKV and Ada-SnapKV
// (Li et al. 2024, https://arxiv.org/abs/2404.14469): the attention the last W prompt queries
// pay to each earlier key, reduced over the GQA group, then pooled along the keys.
#pragma once
#include <ATen/ATen.h>

#include "harness/common/json_fields.h"
#include "methods/common/attention_scores.h"

namespace kvb {

struct SnapKVScoring {
  int window = 8;   // W: observation window (KVCache-Factory's runner; SnapKV's own configs: 32)
  int kernel = 7;   // pooling kernel, odd
  std::string pooling = "max";       // max | avg
  std::string group_reduce = "mean";  // mean | max | sum, applied before pooling

  // Reads the four fields from `f` (the method's own config object) and validates them.
  void read(JsonFields& f);
  void write(json& j) const;
  void check_budget(int64_t budget, const std::string& where) const;

  // q: [Hq, L, d], k: [Hkv, L, d] -> [Hkv, L - window].
  at::Tensor score(const at::Tensor& q, const at::Tensor& k) const;
};

}  // namespace kvb
