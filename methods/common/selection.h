// Shared selection building blocks: scores of a decode query against a head's resident keys,
// and top-k.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "engine/kv_store.h"

namespace kvb {

// Softmax(q.k / sqrt(d)) of each query head of KV head `head`'s group over all resident keys,
// summed over the group. q: [Hq, d]. Returns [n_head] (logical order).
at::Tensor group_attention_weights(const at::Tensor& q, const LayerKV& kv, int head);
// The same for every KV head at once, for equally filled heads: [Hkv, n], from the decode
// attention kernel's probabilities where a kernel runs (sparse_attention_supported: every row,
// read in place), else ATen's 6 operators on the gathered keys in fp32.
at::Tensor group_attention_weights(const at::Tensor& q, const LayerKV& kv);

// Indices of the k largest scores (all when k >= n), ascending by index; among scores equal to
// the k-th largest, the earliest positions (the same choice on every device). scores: [n].
std::vector<int64_t> top_k_indices(const at::Tensor& scores, int64_t k);

}  // namespace kvb
