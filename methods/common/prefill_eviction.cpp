#include "methods/common/prefill_eviction.h"

#include <algorithm>
#include <iterator>

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

void PrefillEviction::begin(const MethodContext& context) {
  Method::begin(context);
  query_entries_.assign(context.num_layers, {});
  prefill_sizes_.assign(context.num_layers, {});
  layout_bytes_ = 0;
}

std::vector<int64_t> PrefillEviction::capacities(int, const at::Tensor& scores) {
  return std::vector<int64_t>(scores.size(0), context_.budget - window());
}

void PrefillEviction::on_prefill(int layer, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, LayerKV& kv) {
  const int64_t L = q.size(1);
  const double entry_bytes = 2.0 * double(k.size(2)) * double(k.element_size());  // K and V
  const int64_t copies = per_query_head() ? context_.group_size() : 1;
  if (L < context_.budget) {  // prompts shorter than B are not compressed
    layout_bytes_ += double(L * kv.num_heads() * copies) * entry_bytes;
    return;
  }
  at::Tensor scores = score(layer, q, k);  // [Hkv or Hq, L - window]
  const std::vector<int64_t> caps = capacities(layer, scores);
  for (int64_t cap : caps) {  // the current token's slot is not part of the layout's prefill
    const int64_t kept = std::clamp<int64_t>(cap - 1, 0, scores.size(1)) + window();
    layout_bytes_ += double(kept) * entry_bytes;
  }
  if (per_query_head()) {
    keep_per_query_head(layer, scores, caps, kv);
    return;
  }
  for (int h = 0; h < kv.num_heads(); ++h)
    keep_top_and_tail(kv, h, scores[h], caps[h] - 1);  // -1: the current token's slot
}

void PrefillEviction::keep_per_query_head(int layer, const at::Tensor& scores,
                                          const std::vector<int64_t>& caps, LayerKV& kv) {
  const int64_t n = scores.size(1), g = context_.group_size(), W = kv.size(0) - n;
  query_entries_[layer].assign(size_t(scores.size(0)), {});
  prefill_sizes_[layer].assign(size_t(kv.num_heads()), 0);
  for (int h = 0; h < kv.num_heads(); ++h) {
    std::vector<std::vector<int64_t>> tops(g);  // each query head's scored keys, ascending
    std::vector<int64_t> kept;                  // their union, then the window
    for (int64_t i = 0; i < g; ++i) {
      const int64_t row = h * g + i;
      tops[i] = top_k_indices(scores[row], std::clamp<int64_t>(caps[row] - 1, 0, n));
      std::vector<int64_t> merged;
      std::set_union(kept.begin(), kept.end(), tops[i].begin(), tops[i].end(),
                     std::back_inserter(merged));
      kept = std::move(merged);
    }
    const int64_t scored = int64_t(kept.size());
    for (int64_t j = n; j < n + W; ++j) kept.push_back(j);
    kv.keep(h, kept);
    prefill_sizes_[layer][h] = int64_t(kept.size());
    for (int64_t i = 0; i < g; ++i) {  // positions in the union, then the window's entries
      std::vector<int64_t>& mine = query_entries_[layer][h * g + i];
      for (int64_t j : tops[i])
        mine.push_back(std::lower_bound(kept.begin(), kept.begin() + scored, j) - kept.begin());
      for (int64_t j = scored; j < scored + W; ++j) mine.push_back(j);
    }
  }
}

Selection PrefillEviction::select(int layer, const at::Tensor&, const LayerKV& kv) {
  if (query_entries_.empty() || query_entries_[layer].empty()) return Selection::everything();
  const int64_t g = context_.group_size();
  std::vector<std::vector<int64_t>> lists = query_entries_[layer];
  for (size_t row = 0; row < lists.size(); ++row) {  // + the decode tokens
    const int h = int(int64_t(row) / g);
    for (int64_t j = prefill_sizes_[layer][h]; j < kv.size(h); ++j) lists[row].push_back(j);
  }
  return Selection::from_lists(lists, /*per_query_head=*/true, kv.key_pool().device());
}

std::map<std::string, double> PrefillEviction::counters() const {
  return {{"layout_kv_bytes", layout_bytes_}};
}

}  // namespace kvb
