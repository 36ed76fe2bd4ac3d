// Base of the score-then-evict methods (SnapKV, PyramidKV, Ada-SnapKV, H2O's prefill variant):
// after a layer's prefill, score every prompt key outside the last `window` positions, give
// each KV head a capacity, keep per head its top-capacity keys plus the window. A subclass
// supplies the score and, when not uniform, the capacities.
//
// Budget accounting (the harness's one meaning of B): a decode step attends to what prefill
// kept plus the new token, so prefill keeps B - 1 entries per head on average; the slot of the
// current token is taken from the scored part. These methods do not evict during decoding, so
// step t attends B + t - 1 entries, as in their papers.
//
// Per query head (`per_query_head()`, the references that repeat the KV): scores and
// capacities come per query head; each query head keeps its own top keys plus the window and
// attends only to them (and the decode tokens); its KV head holds the union of the group's
// selections. The reference's repeated layout holds each query head's copy: g times the
// entries of a per-KV-head cache at the same B (counter `layout_kv_bytes`).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "methods/method.h"

namespace kvb {

class PrefillEviction : public Method {
 public:
  void begin(const MethodContext& context) override;
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  LayerKV& kv) override;
  // Per KV head: everything resident; per query head: each query head's own entries.
  Selection select(int layer, const at::Tensor& q, const LayerKV& kv) override;
  bool holds_step_tensors() const override { return false; }  // decode reads no step tensor
  // layout_kv_bytes: K and V bytes the method's cache layout holds after prefill, all layers:
  // per KV head, or per query head (each query head's copy) with per_query_head().
  std::map<std::string, double> counters() const override;

 protected:
  // Observation/recent window always kept (the last `window` prompt positions).
  virtual int64_t window() const = 0;
  // Scores of the prompt keys outside the window: [Hkv, L - window] ([Hq, L - window] per
  // query head), higher = keep.
  virtual at::Tensor score(int layer, const at::Tensor& q, const at::Tensor& k) = 0;
  // Per row of `scores`, how many scored keys to keep (before the current token's slot is
  // reserved). Default: B - window for every row.
  virtual std::vector<int64_t> capacities(int layer, const at::Tensor& scores);
  // Whether score() and capacities() are per query head (the KV repeated, as some references).
  virtual bool per_query_head() const { return false; }

 private:
  // Per query head: keeps the union of the group's selections in each KV head.
  void keep_per_query_head(int layer, const at::Tensor& scores, const std::vector<int64_t>& caps,
                           LayerKV& kv);

  // Per query head, after prefill: [layer][Hq] its logical entries (ascending) in its KV head;
  // [layer][Hkv] how many entries the KV head held then (decode tokens come after).
  std::vector<std::vector<std::vector<int64_t>>> query_entries_;
  std::vector<std::vector<int64_t>> prefill_sizes_;
  // The same on the device, built at a layer's first decode step: its prefill selection, the
  // unit of each entry [nnz] and each unit's KV-head size after prefill [Hq].
  struct DeviceEntries {
    Selection prefill;
    at::Tensor unit_of_entry, first_decode_entry;
  };
  std::vector<DeviceEntries> device_entries_;
  // query_entries_ of `layer` plus the `decoded` entries appended since, as device ops.
  Selection with_decode_tokens(int layer, int64_t decoded, at::Device device);
  double layout_bytes_ = 0;
};

// Keeps, for `head`, the top `count` of `scores` ([n] over logical entries 0..n-1) and every
// entry from `n` on (the window). `count` is clamped to [0, n]. Returns the kept indices.
std::vector<int64_t> keep_top_and_tail(LayerKV& kv, int head, const at::Tensor& scores, int64_t count);

}  // namespace kvb
