// Shared scoring building blocks of the eviction family. All probabilities are fp32 softmaxes
// of q.k / sqrt(d) under the causal mask; GQA queries are matched to their KV head without
// repeating K (query head h uses KV head h / g).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace kvb {

// Attention of the last `window` prompt queries over all L keys.
// q: [Hq, L, d], k: [Hkv, L, d] -> [Hq, window, L]; query L-window+i sees keys <= L-window+i.
at::Tensor window_attention(const at::Tensor& q, const at::Tensor& k, int64_t window);

// For each key j, the sum over queries i of A[i, j]^power, counting only queries with
// i >= j + skip_after (skip_after = 0: every query that sees j, including j itself).
// Computed in query chunks so memory stays O(chunk x L), never L x L: chunk_bytes of fp32
// probabilities (0: attention_score_bytes of the device, engine/model/llama_layers.h).
// q: [Hq, L, d], k: [Hkv, L, d] -> [Hq, L].
at::Tensor column_attention_sum(const at::Tensor& q, const at::Tensor& k, double power = 1.0,
                                int64_t skip_after = 0, int64_t chunk_bytes = 0);

// The attention each entry received at one decode step, from Method::on_attention's probs (per
// unit [queries of the unit, n_u]): per unit, the sum over its queries of p^power, all units
// concatenated ([sum of n_u] fp32), on the probabilities' device.
at::Tensor received_by_entry(const std::vector<at::Tensor>& probs, double power = 1.0);

// How a GQA group's query-head scores become one KV head's scores.
enum class GroupReduce { kMean, kMax, kSum };
GroupReduce parse_group_reduce(const std::string& name, const std::string& where);
std::string to_string(GroupReduce reduce);
// scores: [Hq, ...] -> [Hkv, ...], groups of g = Hq / Hkv consecutive query heads.
at::Tensor reduce_query_groups(const at::Tensor& scores, int64_t num_kv_heads, GroupReduce reduce);

// 1-D pooling along the last dim, kernel k (odd), stride 1, padding k/2, same length out.
// Max pooling pads with -inf; average pooling counts the zero padding (count_include_pad).
enum class PoolMode { kMax, kAvg };
PoolMode parse_pool_mode(const std::string& name, const std::string& where);
std::string to_string(PoolMode mode);
at::Tensor pool1d(const at::Tensor& scores, int64_t kernel, PoolMode mode);  // [H, n] -> [H, n]

// Cross-head allocation: the top `total` entries of the flattened scores [H, n]; returns how
// many landed in each row (sums to min(total, H*n)); ties at the threshold go to the earliest
// flattened positions, as in top_k_indices.
std::vector<int64_t> flattened_allocation(const at::Tensor& scores, int64_t total);

}  // namespace kvb
