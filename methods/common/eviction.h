// Shared eviction building blocks.
#pragma once
#include <cstdint>

#include "engine/kv_store.h"

namespace kvb {

// Keeps the first `sinks` and the last `total - sinks` entries of every head (a head holding
// `total` or fewer is left as it is), in one LayerKV::keep for the layer, compacted as `how`.
void keep_sinks_and_recent(LayerKV& kv, int64_t sinks, int64_t total,
                           Compaction how = Compaction::kKeepFront);

}  // namespace kvb
