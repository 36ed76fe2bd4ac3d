// KV-Compress's building blocks (Rehg 2024, https://arxiv.org/abs/2410.00161), exposed for tests:
// the squared-attention metric and the block eviction plan across (layer, KV head) cells.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/kv_store.h"

namespace kvb {

// How a key's eviction metric is computed from the prompt's attention.
struct KVCompressMetric {
  std::string variant = "w";  // "w": last `window` queries, pooled; "full": all queries, no pooling
  int window = 8;             // KVC-w observation window w
  int kernel = 7;             // KVC-w max-pooling kernel (odd; 1 = none)
  double power = 2.0;         // 2: squared attention (L2, the paper's default); 1: plain (L1)
  int skip_queries = 10;      // KVC-full: v, query i counts for key j only when i >= j + v
  int protected_tail = 8;     // last prompt positions: never evicted
  // KVC-w's pooling runs over "all" keys, the protected tail's too (the paper's eq. 8, the fork's
  // max_pool1d), or "evictable": [0, L - protected) only (kvbench before 2026-11-29).
  std::string pool_scope = "all";

  // Per KV head and key: sum over the counted queries of A^power, per query head; KVC-w then
  // max-pools along the keys of `pool_scope`; finally summed over each GQA group.
  // q: [Hq, L, d], k: [Hkv, L, d] -> [Hkv, L].
  at::Tensor compute(const at::Tensor& q, const at::Tensor& k) const;
};

// The cache size (entries per KV head, the current token included) of the compression-rate
// mode, as IsaacRe/vllm-kvcompress experiments/run_longbench.py derives --max-cache-tokens from
// --compression-rate r: max(min_cache_tokens, (int(L / r) - 1) // block * block).
// Example: L = 5000, r = 8 -> 624; L = 1000, r = 8 -> 112 -> 128 (the minimum).
int64_t kvcompress_rate_budget(int64_t prompt_length, double rate, int64_t min_cache_tokens,
                               int64_t block_size = kKvBlockSize);

// One (layer, KV head) cell: its resident entries' metrics in logical order.
struct EvictionCell {
  std::vector<float> metrics;  // [n]
  int64_t protected_tail = 0;  // the last entries of the cell, never evicted
};

// The paper's block schedule: per cell, the evictable metrics sorted ascending, preceded by the
// empty slots of the cell's last physical block (metric 0: they go first, so evicting the first
// unit frees a whole block), cut into units of `block_size` slots (unit metric = its last,
// largest, metric); units of all cells sorted by metric (ties: cell order, then unit order) and
// evicted lowest first until at least `entries_to_evict` entries are gone.
// Returns per cell the logical indices to keep, ascending.
std::vector<std::vector<int64_t>> plan_block_eviction(const std::vector<EvictionCell>& cells,
                                                      int64_t entries_to_evict,
                                                      int64_t block_size = kKvBlockSize);

}  // namespace kvb
