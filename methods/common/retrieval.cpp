#include "methods/common/retrieval.h"

#include <numeric>

namespace kvb {

void RetrievalMethod::begin(const MethodContext& context) {
  Method::begin(context);
  index_bytes_.assign(context.num_layers, 0);
  fetched_bytes_ = 0;
  steps_ = 0;
  cache_hits_ = cache_lookups_ = 0;
}

Selection RetrievalMethod::select(int layer, const at::Tensor& q, const LayerKV& kv) {
  if (layer == 0) ++steps_;
  if (layer < dense_layers()) return Selection::everything();
  std::vector<int> sparse_heads;
  for (int h = 0; h < kv.num_heads(); ++h)
    if (kv.size(h) > context_.budget) sparse_heads.push_back(h);
  if (sparse_heads.empty()) return Selection::everything();
  Selection s;
  s.all = false;
  s.per_head.resize(kv.num_heads());
  std::vector<std::vector<int64_t>> chosen = select_sparse(layer, q, kv, sparse_heads);
  const int64_t entry_bytes = 2 * int64_t(kv.head_dim()) * int64_t(kv.key_pool().element_size());
  for (size_t i = 0; i < sparse_heads.size(); ++i) {
    s.per_head[sparse_heads[i]] = std::move(chosen[i]);
    fetched_bytes_ += double(s.per_head[sparse_heads[i]].size() * entry_bytes);
  }
  for (int h = 0; h < kv.num_heads(); ++h)
    if (kv.size(h) <= context_.budget) {
      s.per_head[h].resize(kv.size(h));
      std::iota(s.per_head[h].begin(), s.per_head[h].end(), 0);
    }
  return s;
}

void RetrievalMethod::set_index_bytes(int layer, int64_t bytes) { index_bytes_[layer] = bytes; }

void RetrievalMethod::count_cache(int64_t hits, int64_t lookups) {
  cache_hits_ += hits;
  cache_lookups_ += lookups;
}

std::map<std::string, double> RetrievalMethod::counters() const {
  std::map<std::string, double> c;
  c["fetched_bytes_per_step"] = steps_ ? fetched_bytes_ / double(steps_) : 0.0;
  c["index_bytes"] = double(std::accumulate(index_bytes_.begin(), index_bytes_.end(), int64_t(0)));
  if (cache_lookups_ > 0) {
    c["cache_hits"] = double(cache_hits_);
    c["cache_lookups"] = double(cache_lookups_);
    c["cache_hit_rate"] = double(cache_hits_) / double(cache_lookups_);
  }
  return c;
}

}  // namespace kvb
