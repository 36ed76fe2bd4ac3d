#include "methods/common/eviction.h"

#include <vector>

namespace kvb {

void keep_sinks_and_recent(LayerKV& kv, int64_t sinks, int64_t total, Compaction how) {
  std::vector<LayerKV::EntryRange> dropped(size_t(kv.num_heads()));
  for (int h = 0; h < kv.num_heads(); ++h) {
    const int64_t n = kv.size(h);
    if (n > total) dropped[size_t(h)] = {sinks, n - (total - sinks)};  // the rest stay
  }
  kv.drop(dropped, how);
}

PendingReads take_pending_reads(std::vector<at::Tensor>& per_layer) {
  PendingReads out;
  std::vector<at::Tensor> parts;
  for (size_t l = 0; l < per_layer.size(); ++l)
    if (per_layer[l].defined()) {
      out.layers.push_back(l);
      parts.push_back(per_layer[l].reshape({-1}));
      per_layer[l] = at::Tensor();
    }
  if (!parts.empty()) out.values = at::cat(parts).to(at::kCPU).contiguous();
  return out;
}

}  // namespace kvb
