#include "methods/eviction/kv_compress.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/session.h"
#include "methods/method.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// Probabilities of the test's two query heads at query i over key j (L = 12, d = 4):
// head 0 has q = 0 (uniform over keys 0..i); head 1 has q = 2 e_0 and only key 0 = e_0, so
// key 0 has logit 2 * 1 / sqrt(4) = 1 and every other key 0.
double prob(int head, int i, int j) {
  if (j > i) return 0.0;
  if (head == 0) return 1.0 / (i + 1);
  return (j == 0 ? std::exp(1.0) : 1.0) / (std::exp(1.0) + i);
}

void metric_inputs(at::Tensor& q, at::Tensor& k) {
  q = at::zeros({2, 12, 4}, at::kFloat);  // q: [Hq=2, L=12, d=4]
  q[1].select(1, 0).fill_(2.0);
  k = at::zeros({1, 12, 4}, at::kFloat);  // k: [Hkv=1, L=12, d=4]
  k[0][0][0] = 1.0;
}

// Pooled over every key by default, the protected tail's too (the paper's eq. 8; the fork's
// max_pool1d over all keys); pool_scope "evictable" pools keys 0..9 only.
TEST(KVCompress, WindowMetricIsSquaredPooledAndSummedOverTheGroup) {
  at::Tensor q, k;
  metric_inputs(q, k);
  // raw[h][j] = sum over the window queries 10, 11 of p^2.
  double raw[2][12];
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 12; ++j) raw[h][j] = std::pow(prob(h, 10, j), 2) + std::pow(prob(h, 11, j), 2);
  // Key j's metric when keys 0..last are max-pooled (k=3), summed over the two query heads.
  const auto expected = [&](int last, int j) {
    double sum = 0;
    for (int h = 0; h < 2; ++h) {
      double value = raw[h][j];
      if (j <= last)
        for (int n = std::max(0, j - 1); n <= std::min(last, j + 1); ++n) value = std::max(value, raw[h][n]);
      sum += value;
    }
    return sum;
  };
  double scopes_differ = 0;  // the inputs tell the scopes apart
  for (int j = 0; j < 12; ++j) scopes_differ = std::max(scopes_differ, std::fabs(expected(11, j) - expected(9, j)));
  EXPECT_GT(scopes_differ, 1e-3);
  for (const std::string scope : {"all", "evictable"}) {
    KVCompressMetric metric;
    metric.window = 2;
    metric.kernel = 3;
    metric.protected_tail = 2;
    metric.pool_scope = scope;
    at::Tensor got = metric.compute(q, k);  // [1, 12]
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, 12}));
    for (int j = 0; j < 12; ++j)
      EXPECT_NEAR(got[0][j].item<double>(), expected(scope == "all" ? 11 : 9, j), 1e-6)
          << scope << ", key " << j;
  }
}

TEST(KVCompress, FullMetricSkipsTheQueriesRightAfterEachKey) {
  at::Tensor q, k;
  metric_inputs(q, k);
  KVCompressMetric metric;
  metric.variant = "full";
  metric.skip_queries = 3;
  at::Tensor got = metric.compute(q, k);  // [1, 12]
  for (int j = 0; j < 12; ++j) {
    double expected = 0;  // queries i = j + 3 .. 11, both heads, squared, no pooling
    for (int h = 0; h < 2; ++h)
      for (int i = j + 3; i < 12; ++i) expected += std::pow(prob(h, i, j), 2);
    EXPECT_NEAR(got[0][j].item<double>(), expected, 1e-6) << "key " << j;
  }
  EXPECT_EQ(got[0][9].item<double>(), 0.0);
}

TEST(KVCompress, BlockPlanStartsWithTheLastBlocksEmptySlotsAndSpansCells) {
  // Blocks of 4. Cell 0: n = 6 (2 empty slots in its last block), protected 2, evictable
  // metrics 5 1 7 3 -> units {1, 3} (2 entries, metric 3) and {5, 7} (metric 7).
  // Cell 1: n = 8, protected 2, evictable .5 .5 2 2 2 2 (indices 4 5 0 1 2 3) ->
  // units {4, 5, 0, 1} (metric 2) and {2, 3} (metric 2).
  std::vector<EvictionCell> cells{{{5, 1, 7, 3, 9, 9}, 2}, {{2, 2, 2, 2, 0.5, 0.5, 9, 9}, 2}};
  // Ranking: cell 1 unit 0 (2), cell 1 unit 1 (2), cell 0 unit 0 (3), cell 0 unit 1 (7).
  auto keep = plan_block_eviction(cells, 5, 4);
  EXPECT_EQ(keep[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(keep[1], (std::vector<int64_t>{6, 7}));
  keep = plan_block_eviction(cells, 7, 4);
  EXPECT_EQ(keep[0], (std::vector<int64_t>{0, 2, 4, 5}));  // 6 - 2 = 4: one whole block left
  EXPECT_EQ(keep[1], (std::vector<int64_t>{6, 7}));
  keep = plan_block_eviction(cells, 1000, 4);  // protected entries survive anything
  EXPECT_EQ(keep[0], (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(keep[1], (std::vector<int64_t>{6, 7}));
  keep = plan_block_eviction(cells, 0, 4);
  EXPECT_EQ(keep[1].size(), 8u);
}

// Two layers, Hq = 4, Hkv = 2, d = 4, L = 48. Hot keys get logit 400 * 1 / 2 = 200 from their
// query head, so cold keys get probability exactly 0 (float) and the n hot keys of a head 1/n:
// metric = 8 window queries x (query heads attending) x (1/n)^2.
struct Cell {
  std::vector<int> hot_head0, hot_head1;  // hot keys seen by the group's query heads 0 and 1
};

void build_layer(const Cell& c0, const Cell& c1, at::Tensor& q, at::Tensor& k) {
  q = at::zeros({4, 48, 4}, at::kFloat);  // q: [Hq, L, d]
  k = at::zeros({2, 48, 4}, at::kFloat);  // k: [Hkv, L, d]
  const Cell* cells[2] = {&c0, &c1};
  for (int h = 0; h < 2; ++h) {
    q[2 * h].select(1, 0).fill_(400.0);      // query head 2h looks along e_0
    q[2 * h + 1].select(1, 1).fill_(400.0);  // query head 2h+1 along e_1
    for (int j : cells[h]->hot_head0) k[h][j][0] = 1.0;
    for (int j : cells[h]->hot_head1) k[h][j][1] = 1.0;
  }
}

using test::range;

std::vector<int64_t> sorted_union(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

TEST(KVCompress, EvictsBlocksAcrossLayersAndHeadsNeverTheProtected) {
  // Per cell: 40 evictable keys (sorted: cold first) = units of 16, 16, 8 (48 % 16 = 0: no empty
  // slot). Metrics of the last units: (0,0) 4 hot keys seen by both query heads: 8*2/16 = 1;
  // (0,1) 8 hot keys: 8*2/64 = .25; (1,0) key 5 seen by query head 0 and key 25 by query head 1:
  // 8 each (the group sum counts both); (1,1) key 0: 16. B = 15: keep 14 x 4 = 56 of 192, evict
  // >= 136 = the eight all-cold units (128) + the lowest last unit, (0,1)'s 8 hot keys.
  const Cell c00{{3, 10, 20, 30}, {3, 10, 20, 30}}, c01{{0, 2, 4, 6, 8, 10, 12, 14}, {0, 2, 4, 6, 8, 10, 12, 14}};
  const Cell c10{{5}, {25}}, c11{{0}, {0}};
  auto method = method_registry().get("kv_compress", "t").create({{"kernel", 1}});
  const MethodContext context = test::context(2, 4, 2, 4, 15, 48);
  method->begin(context);
  std::vector<LayerKV> layers;
  for (int l = 0; l < 2; ++l) {
    at::Tensor q, k;
    build_layer(l == 0 ? c00 : c10, l == 0 ? c01 : c11, q, k);
    layers.emplace_back(2, 4, at::kFloat);
    layers[l].append_many(k, k, 0);
    method->on_prefill(l, q, k, k, layers[l]);
    EXPECT_EQ(layers[l].entries(), 96) << "on_prefill only scores";
  }
  method->after_prefill(layers);
  const std::vector<int64_t> protected_tail = range(40, 48);
  // Ties among cold keys go lowest index first, so the highest cold indices survive.
  EXPECT_EQ(layers[0].positions(0), sorted_union({3, 10, 20, 30, 36, 37, 38, 39}, protected_tail));
  EXPECT_EQ(layers[0].positions(1), protected_tail);
  EXPECT_EQ(layers[1].positions(0), sorted_union({5, 25, 34, 35, 36, 37, 38, 39}, protected_tail));
  EXPECT_EQ(layers[1].positions(1), sorted_union({0, 33, 34, 35, 36, 37, 38, 39}, protected_tail));
  EXPECT_EQ(layers[0].entries() + layers[1].entries(), 56);
}

TEST(KVCompress, ConfigValidation) {
  const MethodInfo& info = method_registry().get("kv_compress", "test");
  const json defaults = info.normalise_config(json::object(), "s");
  EXPECT_EQ(defaults, (json{{"variant", "w"}, {"window", 8}, {"kernel", 7}, {"aggregation", "l2"},
                            {"skip_queries", 10}, {"protected", 8}, {"pool_scope", "all"},
                            {"continual", false},
                            {"compression_rate", 0.0}, {"min_cache_tokens", 128}}));
  auto message = [&](const json& config, int64_t budget) -> std::string {
    try {
      info.check_budget(info.normalise_config(config, "s"), budget, "s");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({{"variant", "half"}}, 64).find("s.variant"), std::string::npos);
  EXPECT_NE(message({{"kernel", 2}}, 64).find("s.kernel"), std::string::npos);
  EXPECT_NE(message({{"window", 0}}, 64).find("s.window"), std::string::npos);
  EXPECT_NE(message({{"aggregation", "l3"}}, 64).find("s.aggregation"), std::string::npos);
  EXPECT_NE(message({{"pool_scope", "tail"}}, 64).find("s.pool_scope"), std::string::npos);
  EXPECT_NE(message({{"protected", -1}}, 64).find("s.protected"), std::string::npos);
  EXPECT_NE(message({{"skip_queries", -1}}, 64).find("s.skip_queries"), std::string::npos);
  EXPECT_NE(message({{"block", 16}}, 64).find("block"), std::string::npos);
  EXPECT_NE(message({{"window", 16}, {"protected", 2}}, 16).find("s.window"), std::string::npos);
  EXPECT_NE(message({{"protected", 16}, {"window", 2}}, 16).find("s.protected"), std::string::npos);
  EXPECT_EQ(message({{"variant", "full"}, {"window", 64}, {"continual", true}}, 32), "");
  EXPECT_NE(message({{"compression_rate", 0.5}}, 64).find("s.compression_rate"), std::string::npos);
  EXPECT_NE(message({{"min_cache_tokens", 0}}, 64).find("s.min_cache_tokens"), std::string::npos);
  // The rate mode checks against its smallest size, not the (ignored) budget axis.
  EXPECT_EQ(message({{"compression_rate", 8}}, 4), "");
  EXPECT_NE(message({{"compression_rate", 8}, {"min_cache_tokens", 8}}, 64)
                .find("min_cache_tokens 8"),
            std::string::npos);
}

TEST(KVCompress, CompressionRateGivesTheForksCacheSize) {
  // max(min_cache_tokens, (int(L / r) - 1) // 16 * 16), as experiments/run_longbench.py.
  EXPECT_EQ(kvcompress_rate_budget(5000, 8.0, 128), 624);  // 625 - 1 = 624 = 39 blocks
  EXPECT_EQ(kvcompress_rate_budget(1000, 8.0, 128), 128);  // 124 -> 112, below the minimum
  EXPECT_EQ(kvcompress_rate_budget(1000, 8.0, 16), 112);
  EXPECT_EQ(kvcompress_rate_budget(320, 2.0, 16), 144);    // 159 -> 144
  EXPECT_EQ(kvcompress_rate_budget(1000, 3.0, 16), 320);   // int(333.3) - 1 = 332 -> 320
}

std::vector<int> prompt(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 29 + 5) % 250);
  return ids;
}

TEST(KVCompress, BudgetAbovePromptMatchesFull) {
  test::expect_matches_full("kv_compress", 128, prompt(100));
  // 100 + 6 tokens never outgrow 128
  test::expect_matches_full("kv_compress", 128, prompt(100), {{"continual", true}});
  test::expect_matches_full("kv_compress", 128, prompt(100), {{"variant", "full"}});
}

// Mean over (layer, head) of attended entries per step.
double mean_attended(const Session& s) {
  const AttendedCounts& a = s.attended();
  double total = 0;
  for (double sum : a.sum) total += sum / double(a.steps);
  return total / double(a.sum.size());
}

TEST(KVCompress, AttendsBOnAverageWithinOneBlock) {
  auto model = LlamaModel::from_reference("random-tiny");
  const int cells = model->config.num_hidden_layers * model->config.num_key_value_heads;
  for (const json& config : {json::object(), json{{"variant", "full"}}}) {
    auto kvc = method_registry().get("kv_compress", "t").create(config);
    SessionOptions options;
    options.budget = 32;
    Session s(*model, *kvc, options);
    const int64_t before = 100 * cells * 2 * 16 * 4;  // K and V, d = 16, fp32
    const int token = argmax_token(s.prefill(prompt(100)));
    EXPECT_LT(s.kv_allocated_bytes(), before / 2) << "memory shrinks for real";
    s.decode(token);
    EXPECT_LE(mean_attended(s), 32.0) << config;
    EXPECT_GT(mean_attended(s), 32.0 - 16.0 / cells) << config;
    for (int l = 0; l < model->config.num_hidden_layers; ++l)
      for (int h = 0; h < model->config.num_key_value_heads; ++h) {
        const std::vector<int64_t>& p = s.kv()[l].positions(h);
        ASSERT_GE(p.size(), 9u);
        for (int i = 0; i < 8; ++i) EXPECT_EQ(p[p.size() - 9 + i], 92 + i) << "protected kept";
      }
  }
}

TEST(KVCompress, RateModeSizesTheCacheFromThePrompt) {
  // L = 300, r = 2: (150 - 1) // 16 * 16 = 144 per KV head; the cell's budget (32) is ignored.
  auto model = LlamaModel::from_reference("random-tiny");
  auto kvc = test::make_method("kv_compress", {{"compression_rate", 2.0}, {"min_cache_tokens", 16}});
  SessionOptions options;
  options.budget = 32;
  Session s(*model, *kvc, options);
  s.decode(argmax_token(s.prefill(prompt(300))));
  EXPECT_LE(mean_attended(s), 144.0);
  EXPECT_GT(mean_attended(s), 144.0 - 16.0 / double(s.attended().sum.size()));
  EXPECT_EQ(kvc->counters().at("derived_budget"), 144.0);
}

// Two layers of one head (d = 8), L = 48, B = 40, w = 1, no pooling, 1 protected position.
// Layer 0's last query looks at every key alike (metric (1/48)^2 each); layer 1's only at itself
// (the others ~0). Prefill keeps 39 x 2 = 78 of 96: layer 1's two coldest units go (32 entries,
// its lowest-index keys on ties): layer 0 keeps 0..47, layer 1 32..47.
struct TwoLayerContinual {
  std::unique_ptr<Method> method = test::make_method(
      "kv_compress", {{"window", 1}, {"kernel", 1}, {"protected", 1}, {"continual", true}});
  std::vector<LayerKV> layers;

  TwoLayerContinual() {
    method->begin(test::context(2, 1, 1, 8, 40, 48));
    for (int l = 0; l < 2; ++l) {
      at::Tensor k = at::zeros({1, 48, 8}), q = at::zeros({1, 48, 8});  // [H, L, d]
      if (l == 1) {
        k.select(2, 1).fill_(1.0);  // keys 0..46 along e_1, key 47 along e_0
        k[0][47] = test::unit(0, 8);
        q[0][47] = test::unit(0, 8) * 60.0;
      }
      layers.emplace_back(1, 8, at::kFloat);
      layers[l].append_many(k, k, 0);
      method->on_prefill(l, q, k, k, layers[l]);
    }
    method->after_prefill(layers);
  }

  // One decode step: the cross-layer eviction, then per layer the new token, attended uniformly
  // in layer 0 and only by itself in layer 1.
  void step(int64_t position) {
    method->on_decode_step(layers);
    for (int l = 0; l < 2; ++l) {
      layers[l].append(at::zeros({1, 8}), at::zeros({1, 8}), position);
      method->on_append(l, at::zeros({1, 8}), at::zeros({1, 8}), layers[l]);
      const int64_t n = layers[l].size(0);
      at::Tensor probs = l == 0 ? at::full({1, n}, 1.0 / double(n)) : at::zeros({1, n});  // [g, n]
      if (l == 1) probs[0][n - 1] = 1.0;
      method->on_attention(l, Selection::everything(), {probs}, layers[l]);
    }
  }
};

TEST(KVCompress, ContinualEvictsAcrossAllLayersBeforeEachStep) {
  TwoLayerContinual t;
  EXPECT_EQ(t.layers[0].positions(0), range(0, 48));
  EXPECT_EQ(t.layers[1].positions(0), range(32, 48));
  // Steps 1-8 bring the cache from 64 to 80 entries: nothing goes while it fits 78 before a
  // step (a per-layer rule would already have cut layer 0, grown past its prefill share).
  for (int64_t p = 48; p < 56; ++p) t.step(p);
  EXPECT_EQ(t.layers[0].positions(0), range(0, 56));
  EXPECT_EQ(t.layers[1].positions(0), range(32, 56));
  // Step 9: 80 > 78, evict >= 2: the lowest unit of all layers is layer 1's first, 8 entries
  // (24 % 16 leaves 8 empty slots in its last block) with keys 32..39 (~0 metric): all the
  // eviction is in layer 1, none in layer 0.
  t.step(56);
  EXPECT_EQ(t.layers[0].positions(0), range(0, 57));
  EXPECT_EQ(t.layers[1].positions(0), range(40, 57));
}

TEST(KVCompress, ContinualKeepsTheBudgetWhileDecoding) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto kvc = method_registry().get("kv_compress", "t").create({{"continual", true}});
  SessionOptions options;
  options.budget = 32;
  Session s(*model, *kvc, options);
  int token = argmax_token(s.prefill(prompt(100)));
  for (int step = 0; step < 40; ++step) token = argmax_token(s.decode(token));
  EXPECT_LE(mean_attended(s), 32.0);
  EXPECT_GT(mean_attended(s), 32.0 - 16.0);
  for (size_t cell = 0; cell < s.attended().max.size(); ++cell)
    EXPECT_LE(s.attended().max[cell], 100) << "never grows back to the prompt";
  int64_t total = 0;
  for (const LayerKV& layer : s.kv()) total += layer.entries();
  EXPECT_LE(total, 32 * int64_t(s.attended().sum.size()));
}

}  // namespace
}  // namespace kvb
