#include "methods/common/prefill_eviction.h"

#include <algorithm>
#include <iterator>

#include "engine/device.h"
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
  device_entries_.assign(context.num_layers, DeviceEntries{});
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
  // Every KV head gained one entry per decode step since prefill.
  const int64_t decoded = kv.size(0) - prefill_sizes_[layer][0];
  return with_decode_tokens(layer, decoded, kv.key_pool().device());
}

Selection PrefillEviction::with_decode_tokens(int layer, int64_t decoded, at::Device device) {
  const int64_t g = context_.group_size();
  DeviceEntries& base = device_entries_[layer];
  if (!base.unit_of_entry.defined()) {  // once per layer and sequence: one copy to the device
    const std::vector<std::vector<int64_t>>& lists = query_entries_[layer];
    base.prefill = Selection::from_lists(lists, /*per_query_head=*/true, device);
    std::vector<int64_t> units, first;
    for (size_t u = 0; u < lists.size(); ++u) {
      units.insert(units.end(), lists[u].size(), int64_t(u));
      first.push_back(prefill_sizes_[layer][u / size_t(g)]);
    }
    base.unit_of_entry = host_to_device(units, device);
    base.first_decode_entry = host_to_device(first, device);
  }
  if (decoded == 0) return base.prefill;
  // Unit u's lists grow by `decoded` entries each: its prefill entries move u * decoded places
  // on, its decode entries first_decode_entry[u] + j fill the gap after them.
  const Selection& p = base.prefill;
  const int64_t units = p.units(), nnz = p.indices.size(0);
  const at::TensorOptions longs = p.indices.options();
  at::Tensor step = at::arange(decoded, longs).unsqueeze(0);                     // [1, t]
  at::Tensor unit_shift = at::arange(units, longs) * decoded;                    // [units]
  at::Tensor decode_at = (p.indptr.narrow(0, 1, units) + unit_shift).unsqueeze(1) + step;
  at::Tensor indices = at::empty({nnz + units * decoded}, longs);
  indices.index_put_({at::arange(nnz, longs) + base.unit_of_entry * decoded}, p.indices);
  indices.index_put_({decode_at.reshape({-1})},
                     (base.first_decode_entry.unsqueeze(1) + step).reshape({-1}));
  Selection s;
  s.all = false;
  s.per_query_head = true;
  s.indptr = p.indptr + at::arange(units + 1, longs) * decoded;
  s.indices = indices;
  s.max_count = p.max_count + decoded;
  for (int64_t count : p.host_counts) s.host_counts.push_back(count + decoded);
  return s;
}

std::map<std::string, double> PrefillEviction::counters() const {
  return {{"layout_kv_bytes", layout_bytes_}};
}

}  // namespace kvb
