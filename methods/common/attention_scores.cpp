#include "methods/common/attention_scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/common/error.h"
#include "engine/model/llama_layers.h"
#include "methods/common/selection.h"

namespace kvb {
namespace {

// Softmax attention of queries [c0, c0+n) over keys [0, keys) for every query head.
// q: [Hq, L, d], k: [Hkv, L, d] -> [Hq, n, keys], causal.
at::Tensor causal_probs(const at::Tensor& q, const at::Tensor& k, int64_t c0, int64_t n,
                        int64_t keys) {
  const int64_t Hq = q.size(0), Hkv = k.size(0), g = Hq / Hkv, d = q.size(2);
  at::Tensor qc = q.narrow(1, c0, n).reshape({Hkv, g * n, d}).to(at::kFloat);
  at::Tensor kc = k.narrow(1, 0, keys).to(at::kFloat);
  at::Tensor logits = at::bmm(qc, kc.transpose(1, 2)).div_(std::sqrt(double(d)))
                          .view({Hq, n, keys});
  const at::TensorOptions longs = q.options().dtype(at::kLong);
  at::Tensor mask = at::arange(keys, longs).unsqueeze(0) >
                    (at::arange(n, longs) + c0).unsqueeze(1);  // [n, keys]
  return at::softmax(logits.masked_fill_(mask, -std::numeric_limits<float>::infinity()), -1);
}

}  // namespace

at::Tensor window_attention(const at::Tensor& q, const at::Tensor& k, int64_t window) {
  const int64_t L = q.size(1);
  return causal_probs(q, k, L - window, window, L);
}

at::Tensor column_attention_sum(const at::Tensor& q_any, const at::Tensor& k_any, double power,
                                int64_t skip_after, int64_t chunk_bytes) {
  // In fp32 once, not per chunk (causal_probs' conversions are then no-ops).
  const at::Tensor q = q_any.to(at::kFloat), k = k_any.to(at::kFloat);
  const int64_t Hq = q.size(0), L = q.size(1);
  if (chunk_bytes <= 0) chunk_bytes = attention_score_bytes(q.device());
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(L, chunk_bytes / (4 * Hq * L)));
  const at::TensorOptions longs = q.options().dtype(at::kLong);
  at::Tensor total = at::zeros({Hq, L}, q.options().dtype(at::kFloat));
  for (int64_t c0 = 0; c0 < L; c0 += chunk) {
    const int64_t n = std::min(chunk, L - c0);
    // Queries c0.. see keys 0..c0+n-1 only: the later keys' probabilities would be exact zeros
    // (about half of the products and softmax of a prompt's chunks, computed then masked).
    const int64_t keys = c0 + n;
    at::Tensor probs = causal_probs(q, k, c0, n, keys);  // [Hq, n, keys]
    if (power != 1.0) probs = probs.pow(power);
    if (skip_after > 0) {
      // Query c0+i counts for key j only when c0+i >= j + skip_after.
      at::Tensor too_close = at::arange(keys, longs).unsqueeze(0) + skip_after >
                             (at::arange(n, longs) + c0).unsqueeze(1);  // [n, keys]
      probs.masked_fill_(too_close, 0.0);
    }
    total.narrow(1, 0, keys) += probs.sum(1);
  }
  return total;
}

at::Tensor received_by_entry(const std::vector<at::Tensor>& probs, double power) {
  std::vector<at::Tensor> sums;  // per unit [n_u], on the device
  for (const at::Tensor& p : probs) {
    at::Tensor f = p.to(at::kFloat);
    sums.push_back((power == 1.0 ? f : f.pow(power)).sum(0));
  }
  if (sums.empty()) return at::empty({0}, at::kFloat);
  return at::cat(sums);
}

GroupReduce parse_group_reduce(const std::string& name, const std::string& where) {
  if (name == "mean") return GroupReduce::kMean;
  if (name == "max") return GroupReduce::kMax;
  if (name == "sum") return GroupReduce::kSum;
  throw InputError(where + ": \"" + name + "\" is not one of mean, max, sum");
}

std::string to_string(GroupReduce reduce) {
  return reduce == GroupReduce::kMean ? "mean" : reduce == GroupReduce::kMax ? "max" : "sum";
}

at::Tensor reduce_query_groups(const at::Tensor& scores, int64_t num_kv_heads,
                               GroupReduce reduce) {
  std::vector<int64_t> shape = scores.sizes().vec();
  shape[0] = scores.size(0) / num_kv_heads;
  shape.insert(shape.begin(), num_kv_heads);
  at::Tensor grouped = scores.reshape(shape);  // [Hkv, g, ...]
  switch (reduce) {
    case GroupReduce::kMean: return grouped.mean(1);
    case GroupReduce::kMax: return std::get<0>(grouped.max(1));
    default: return grouped.sum(1);
  }
}

PoolMode parse_pool_mode(const std::string& name, const std::string& where) {
  if (name == "max") return PoolMode::kMax;
  if (name == "avg") return PoolMode::kAvg;
  throw InputError(where + ": \"" + name + "\" is not one of max, avg");
}

std::string to_string(PoolMode mode) { return mode == PoolMode::kMax ? "max" : "avg"; }

at::Tensor pool1d(const at::Tensor& scores, int64_t kernel, PoolMode mode) {
  const int64_t pad = kernel / 2;
  at::Tensor x = scores.unsqueeze(1);  // [H, 1, n]: channels-first for the 1-D pooling ops
  at::Tensor pooled = mode == PoolMode::kMax
                          ? at::max_pool1d(x, {kernel}, {1}, {pad})
                          : at::avg_pool1d(x, {kernel}, {1}, {pad}, false, /*count_include_pad=*/true);
  return pooled.squeeze(1);
}

std::vector<int64_t> flattened_allocation(const at::Tensor& scores, int64_t total) {
  const int64_t n = scores.size(1);
  std::vector<int64_t> counts(size_t(scores.size(0)), 0);
  // top_k_indices' tie rule: among scores equal to the threshold, the earliest flattened
  // positions (lower heads first), the same split on every device.
  for (int64_t i : top_k_indices(scores.reshape({-1}), std::max<int64_t>(total, 0)))
    ++counts[size_t(i / n)];
  return counts;
}

}  // namespace kvb
