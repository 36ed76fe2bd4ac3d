#include "methods/common/eviction.h"

#include <vector>

namespace kvb {

void keep_sinks_and_recent(LayerKV& kv, int head, int64_t sinks, int64_t total) {
  const int64_t n = kv.size(head);
  if (n <= total) return;
  std::vector<int64_t> keep;
  keep.reserve(total);
  for (int64_t i = 0; i < sinks; ++i) keep.push_back(i);
  for (int64_t i = n - (total - sinks); i < n; ++i) keep.push_back(i);
  kv.keep(head, keep);
}

}  // namespace kvb
