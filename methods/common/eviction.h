// Shared eviction building blocks.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "engine/kv_store.h"

namespace kvb {

// Keeps the first `sinks` and the last `total - sinks` entries of every head (a head holding
// `total` or fewer is left as it is), in one LayerKV::drop for the layer, compacted as `how`.
void keep_sinks_and_recent(LayerKV& kv, int64_t sinks, int64_t total,
                           Compaction how = Compaction::kKeepFront);

// Per-layer results a method leaves on the device during a decode step and reads on the host
// once, when the next step begins (on_decode_step): then the previous token has been read and
// the device is idle, so no layer waits for it.
struct PendingReads {
  std::vector<size_t> layers;  // the layers that had a result, ascending
  at::Tensor values;           // their results flattened and concatenated, on the host
};
// Takes the defined entries of `per_layer` (leaving it all undefined), in one copy.
PendingReads take_pending_reads(std::vector<at::Tensor>& per_layer);

}  // namespace kvb
