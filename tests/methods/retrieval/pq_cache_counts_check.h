// PQCache's deferred cache accounting against a replay of every step's selection on the host
// (LfuBlockCache stepped at once). Used on the CPU (pqcache_test.cpp, counted at the flush)
// and on a GPU (tests/gpu/device_parity_test.cpp, counted on the method's own thread).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "engine/kv_store.h"
#include "methods/retrieval/pqcache.h"
#include "tests/methods/method_test_util.h"

namespace kvb::test {

// 70 steps of one layer on `device` (two flushes and the end's), with and without
// on_decode_step (a method driven layer by layer flushes from select_rows).
inline void expect_deferred_cache_counts(const at::Device& device) {
  const int64_t L = 96, d = 4, steps = 70, sinks = 2, local = 3, block = 4;
  const at::TensorOptions floats = at::TensorOptions(device).dtype(at::kFloat);
  for (const bool hooked : {true, false}) {
    SCOPED_TRACE(hooked ? "on_decode_step called" : "on_decode_step not called");
    auto method = make_method(
        "pqcache", {{"sinks", sinks}, {"subspaces", 2}, {"bits", 3}, {"cache_block", block},
                    {"cache_tokens", 3 * block}});
    method->begin(context(1, 1, 1, d, sinks + local + 4 + 1, L));  // top-k 4
    at::manual_seed(3);
    at::Tensor k = at::randn({1, L, d}).to(device), v = at::zeros({1, L, d}, floats);
    std::vector<LayerKV> layers;
    layers.emplace_back(1, d, floats);
    LayerKV& kv = layers[0];
    kv.append_many(k, v, 0);
    method->on_prefill(0, at::zeros({1, L, d}, floats), k, v, kv);
    LfuBlockCache replay(3);
    int64_t hits = 0, lookups = 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (hooked) method->on_decode_step(layers);
      at::Tensor kt = at::randn({1, d}).to(device);
      kv.append(kt, kt, L + t);
      method->on_append(0, kt, kt, kv);
      const std::vector<int64_t> chosen =
          method->select(0, at::randn({1, d}).to(device), kv).lists()[0];
      const int64_t current = L + t;
      std::vector<int64_t> blocks;  // the top-k part: after the sinks, before the local window
      for (int64_t e : chosen)
        if (e >= sinks && e < current - local) blocks.push_back((e - sinks) / block);
      ASSERT_EQ(blocks.size(), 4u) << "step " << t;
      hits += replay.access(blocks);
      lookups += int64_t(blocks.size());
    }
    auto c = method->counters();
    EXPECT_EQ(c["cache_lookups"], double(lookups));
    EXPECT_EQ(c["cache_hits"], double(hits));
    EXPECT_GT(hits, 0);
    EXPECT_LT(hits, lookups);
  }
}

}  // namespace kvb::test
