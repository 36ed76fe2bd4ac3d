// Shared eviction building blocks.
#pragma once
#include <cstdint>

#include "engine/kv_store.h"

namespace kvb {

// Keeps the first `sinks` and the last `total - sinks` entries of `head` (no-op when it holds
// `total` or fewer).
void keep_sinks_and_recent(LayerKV& kv, int head, int64_t sinks, int64_t total);

}  // namespace kvb
