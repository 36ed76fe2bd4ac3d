// SnapKV's observation-window score, shared by SnapKV, PyramidKV and Ada-SnapKV
// (Li et al. 2024, https://arxiv.org/abs/2404.14469): the attention the last W prompt queries
// pay to each earlier key, reduced over the GQA group, then pooled along the keys.
#pragma once
#include <ATen/ATen.h>

#include "engine/common/config_fields.h"
#include "methods/common/attention_scores.h"
#include "methods/common/prefill_eviction.h"

namespace kvb {

struct SnapKVScoring {
  int window = 8;   // W: observation window (KVCache-Factory's runner; SnapKV's own configs: 32)
  int kernel = 7;   // pooling kernel, odd
  std::string pooling = "max";       // max | avg
  std::string group_reduce = "mean";  // mean | max | sum, applied before pooling (per_kv_head)
  // per_kv_head: the group's scores reduced to its KV head, one selection per KV head (the KV is
  // never repeated). per_query_head: every query head scores and selects on its own, as the
  // references that repeat the KV before compressing (KVCache-Factory's default query_head
  // granularity, SnapKV's and AdaKV's own code without GQA support); the KV head then holds the
  // union of its query heads' selections, and the references' layout holds g copies.
  std::string gqa = "per_kv_head";

  // Its fields, shared by the configs of SnapKV, PyramidKV and Ada-SnapKV (fields_of).
  static const ConfigFields<SnapKVScoring>& fields();
  void check_budget(int64_t budget, const std::string& where) const;
  bool per_query_head() const { return gqa == "per_query_head"; }

  // q: [Hq, L, d], k: [Hkv, L, d] -> [Hkv, L - window] (per_kv_head) or [Hq, L - window].
  at::Tensor score(const at::Tensor& q, const at::Tensor& k) const;
};

// The prefill eviction of the SnapKV family: SnapKV's score over the window; subclasses
// override `capacities` (PyramidKV per layer, Ada-SnapKV per head).
class SnapKVScoredEviction : public PrefillEviction {
 public:
  explicit SnapKVScoredEviction(const SnapKVScoring& scoring) : scoring_(scoring) {}

 protected:
  int64_t window() const override { return scoring_.window; }
  bool per_query_head() const override { return scoring_.per_query_head(); }
  at::Tensor score(int, const at::Tensor& q, const at::Tensor& k) override {
    return scoring_.score(q, k);  // [Hkv or Hq, L - W]
  }

 private:
  SnapKVScoring scoring_;
};

}  // namespace kvb
