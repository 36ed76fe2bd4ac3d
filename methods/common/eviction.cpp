#include "methods/common/eviction.h"

#include <algorithm>
#include <vector>

namespace kvb {

void keep_sinks_and_recent(LayerKV& kv, int64_t sinks, int64_t total) {
  std::vector<std::vector<int64_t>> kept(size_t(kv.num_heads()));
  bool evicts = false;
  for (int h = 0; h < kv.num_heads(); ++h) {
    const int64_t n = kv.size(h);
    std::vector<int64_t>& keep = kept[size_t(h)];
    keep.reserve(size_t(std::min(n, total)));
    const int64_t recent_from = n <= total ? sinks : n - (total - sinks);
    for (int64_t i = 0; i < std::min(sinks, n); ++i) keep.push_back(i);
    for (int64_t i = std::max(recent_from, sinks); i < n; ++i) keep.push_back(i);
    evicts = evicts || n > total;
  }
  if (evicts) kv.keep(kept);
}

}  // namespace kvb
