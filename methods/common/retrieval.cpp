#include "methods/common/retrieval.h"

#include <algorithm>
#include <numeric>

namespace kvb {

void RetrievalMethod::begin(const MethodContext& context) {
  Method::begin(context);
  index_bytes_.assign(context.num_layers, 0);
  fetched_bytes_ = 0;
  steps_ = 0;
  cache_hits_ = cache_lookups_ = 0;
  device_cache_hits_ = at::Tensor();
  device_fetched_bytes_ = at::Tensor();
}

Selection RetrievalMethod::select(int layer, const at::Tensor& q, const LayerKV& kv) {
  if (layer == 0) ++steps_;
  if (layer < dense_layers()) return Selection::everything();
  const int64_t all_up_to = attends_all_up_to();
  std::vector<int> sparse_heads;
  for (int h = 0; h < kv.num_heads(); ++h)
    if (kv.size(h) > all_up_to) sparse_heads.push_back(h);
  if (sparse_heads.empty()) return Selection::everything();
  const int64_t entry_bytes = 2 * int64_t(kv.head_dim()) * int64_t(kv.key_pool().element_size());
  if (int(sparse_heads.size()) == kv.num_heads()) {
    const DeviceRows chosen = select_rows(layer, q, kv);  // no host round trip where it has one
    const at::Tensor& rows = chosen.rows;
    if (rows.defined() && chosen.counts.defined()) {
      if (per_query_head())
        throw std::logic_error("retrieval: row prefixes per query head are not supported");
      add_device_fetched_bytes(chosen.counts.sum(at::kDouble), double(entry_bytes));
      return Selection::from_row_prefixes(rows, chosen.counts, false);
    }
    if (rows.defined()) {
      if (!per_query_head()) {
        fetched_bytes_ += double(rows.numel() * entry_bytes);
      } else {  // a KV head's entries are fetched once for its group: the union, counted there
        const int64_t Hkv = kv.num_heads();
        at::Tensor fetched = at::zeros({Hkv, kv.size(0)}, rows.options().dtype(at::kBool));
        fetched.scatter_(1, rows.reshape({Hkv, -1}), true);
        add_device_fetched_bytes(fetched.sum(at::kDouble), double(entry_bytes));
      }
      return Selection::from_rows(rows, per_query_head(), &rows_indptr_);
    }
  }
  const int g = per_query_head() ? context_.group_size() : 1;  // lists per KV head
  std::vector<std::vector<int64_t>> lists(size_t(kv.num_heads()) * g);
  std::vector<std::vector<int64_t>> chosen = select_sparse(layer, q, kv, sparse_heads);
  for (size_t i = 0; i < sparse_heads.size(); ++i) {
    std::vector<int64_t> fetched;  // a KV head's entries are fetched once for its whole group
    for (int j = 0; j < g; ++j) {
      std::vector<int64_t>& list = lists[size_t(sparse_heads[i]) * g + j];
      list = std::move(chosen[i * g + j]);
      fetched.insert(fetched.end(), list.begin(), list.end());
    }
    if (g > 1) {  // the union of the group's lists (a single list is unique already)
      std::sort(fetched.begin(), fetched.end());
      fetched.erase(std::unique(fetched.begin(), fetched.end()), fetched.end());
    }
    fetched_bytes_ += double(int64_t(fetched.size()) * entry_bytes);
  }
  for (int h = 0; h < kv.num_heads(); ++h)
    if (kv.size(h) <= all_up_to)
      for (int j = 0; j < g; ++j) {
        lists[size_t(h) * g + j].resize(kv.size(h));
        std::iota(lists[size_t(h) * g + j].begin(), lists[size_t(h) * g + j].end(), 0);
      }
  return Selection::from_lists(lists, per_query_head(), kv.key_pool().device());
}

void RetrievalMethod::set_index_bytes(int layer, int64_t bytes) { index_bytes_[layer] = bytes; }

void RetrievalMethod::add_device_fetched_bytes(const at::Tensor& entries, double entry_bytes) {
  if (!device_fetched_bytes_.defined()) device_fetched_bytes_ = at::zeros_like(entries);
  device_fetched_bytes_.add_(entries, entry_bytes);
}

std::vector<std::vector<int64_t>> RetrievalMethod::select_sparse(int, const at::Tensor&,
                                                                 const LayerKV&,
                                                                 const std::vector<int>&) {
  throw std::logic_error("retrieval method without a host selection asked for one");
}

at::Tensor RetrievalMethod::device_cache_hits(const at::Device& device) {
  if (!device_cache_hits_.defined())
    device_cache_hits_ = at::zeros({}, at::TensorOptions(device).dtype(at::kLong));
  return device_cache_hits_;
}

void RetrievalMethod::count_cache(int64_t hits, int64_t lookups) {
  cache_hits_ += hits;
  cache_lookups_ += lookups;
}

std::map<std::string, double> RetrievalMethod::counters() const {
  std::map<std::string, double> c;
  const double fetched =
      fetched_bytes_ + (device_fetched_bytes_.defined() ? device_fetched_bytes_.item<double>() : 0.0);
  // A sample the method never compressed fetched nothing: it reports none.
  if (steps_ > 0 && fetched > 0) {
    c["fetched_bytes"] = fetched;
    c["fetch_steps"] = double(steps_);
    c["fetched_bytes_per_step"] = fetched / double(steps_);
  }
  c["index_bytes"] = double(std::accumulate(index_bytes_.begin(), index_bytes_.end(), int64_t(0)));
  if (cache_lookups_ > 0) {
    const double hits = double(cache_hits_) +
                        (device_cache_hits_.defined() ? device_cache_hits_.item<double>() : 0.0);
    c["cache_hits"] = hits;
    c["cache_lookups"] = double(cache_lookups_);
    c["cache_hit_rate"] = hits / double(cache_lookups_);
  }
  return c;
}

}  // namespace kvb
