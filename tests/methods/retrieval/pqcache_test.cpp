#include "methods/retrieval/pqcache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "engine/kernel_adapter.h"
#include "engine/session.h"
#include "tests/methods/method_test_util.h"
#include "tests/methods/retrieval/pq_cache_counts_check.h"
#include "tests/methods/retrieval/pq_selection_check.h"

namespace kvb {
namespace {

double reconstruction_error(const at::Tensor& keys, const PQIndex& index) {
  double err = 0;
  for (int64_t h = 0; h < keys.size(0); ++h)
    err += (keys[h] - pq_reconstruct(index.centroids[h], index.codes[h])).pow(2).sum().item<double>();
  return err;
}

TEST(PQCache, ReconstructionErrorFallsAsBitsGrow) {
  at::manual_seed(1);
  at::Tensor keys = at::randn({2, 512, 16});  // [Hkv, N, d]
  const double e2 = reconstruction_error(keys, pq_build(keys, 2, 2, 100, 1e-4, 0));
  const double e4 = reconstruction_error(keys, pq_build(keys, 2, 4, 100, 1e-4, 0));
  const double e6 = reconstruction_error(keys, pq_build(keys, 2, 6, 100, 1e-4, 0));
  EXPECT_LT(e4, e2);
  EXPECT_LT(e6, e4);
  EXPECT_LT(e6, 0.8 * e2);
}

TEST(PQCache, IndexShapesAndFewKeys) {
  at::manual_seed(2);
  at::Tensor keys = at::randn({3, 10, 8});
  PQIndex index = pq_build(keys, 4, 6, 50, 1e-4, 7);
  // 2^6 centroids > 10 keys: K = 10, every key its own centroid, exact reconstruction.
  EXPECT_EQ(index.centroids.sizes(), (std::vector<int64_t>{3, 4, 10, 2}));
  EXPECT_EQ(index.codes.sizes(), (std::vector<int64_t>{3, 4, 10}));
  EXPECT_LT(reconstruction_error(keys, index), 1e-8);
}

TEST(PQCache, ScoreEqualsQueryDotReconstructedKey) {
  at::manual_seed(3);
  at::Tensor keys = at::randn({1, 200, 16});
  PQIndex index = pq_build(keys, 2, 4, 100, 1e-4, 0);
  at::Tensor q = at::randn({3, 16});  // a group of 3 query heads
  for (KernelPath path : {KernelPath::kAuto, KernelPath::kAten}) {  // the kernel and ATen paths
  at::Tensor scores = pq_scores(q.unsqueeze(0), index.centroids, index.codes, 1.0, path)[0];  // [3, 200]
  // A scale multiplies each score once, as ATen's product would.
  EXPECT_TRUE(at::equal(pq_scores(q.unsqueeze(0), index.centroids, index.codes, 0.125, path)[0],
                        scores * 0.125));
  // Expected, independently: concatenate each token's centroids by hand and take q . k~.
  for (int64_t j = 0; j < 200; ++j) {
    at::Tensor k_hat = at::cat({index.centroids[0][0][index.codes[0][0][j].item<int64_t>()],
                                index.centroids[0][1][index.codes[0][1][j].item<int64_t>()]});
    for (int64_t i = 0; i < 3; ++i) {
      const double expected = (q[i] * k_hat).sum().item<double>();
      EXPECT_NEAR(scores[i][j].item<double>(), expected, 1e-5 * std::max(1.0, std::abs(expected)));
    }
  }
  }
  // Codes as the kernels read them (K = 16); the index's leading columns read in place score
  // as the whole index does.
  EXPECT_EQ(index.codes.scalar_type(), at::kByte);
  const at::Tensor all = pq_scores(q.unsqueeze(0), index.centroids, index.codes)[0];
  EXPECT_TRUE(at::equal(pq_scores(q.unsqueeze(0), index.centroids, index.codes.narrow(2, 0, 150))[0],
                        all.narrow(1, 0, 150)));
}

// Tokens leaving the window get their nearest centroids' codes. The codes live in the leading
// columns of a wider buffer that grows as they do: after 150 decode steps (two growths past the
// prompt's 60 codes) the prompt's codes are unchanged and the codes are still a view of it.
TEST(PQCache, TokensLeavingTheWindowGetTheirNearestCentroids) {
  at::manual_seed(4);
  auto method = test::make_method("pqcache", {{"sinks", 4}, {"bits", 3}});
  auto* pq = dynamic_cast<PQCache*>(method.get());
  ASSERT_NE(pq, nullptr);
  const int64_t L = 64, B = 20, d = 8, steps = 150;
  method->begin(test::context(1, 2, 1, d, B, L));
  // B = 20 = 4 sinks + 7 local + 8 top-k + 1 current.
  EXPECT_EQ(pq->sinks(), 4);
  EXPECT_EQ(pq->local(), 7);
  EXPECT_EQ(pq->topk(), 8);
  at::Tensor k = at::randn({1, L, d}), v = at::randn({1, L, d}), q = at::randn({2, L, d});
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v, 0);
  method->on_prefill(0, q, k, v, kv);
  ASSERT_EQ(pq->index(0).codes.size(2), L - 4);  // every prompt key after the sinks
  const at::Tensor prompt_codes = pq->index(0).codes.clone();  // [1, 2, 60]
  std::set<int64_t> capacities;
  for (int64_t step = 0; step < steps; ++step) {
    at::Tensor kt = at::randn({1, d}) * 2.0, vt = at::randn({1, d});
    kv.append(kt, vt, L + step);
    method->on_append(0, kt, vt, kv);
    Selection s = method->select(0, at::randn({2, d}), kv);
    ASSERT_FALSE(s.all);
    EXPECT_EQ(int64_t(s.lists()[0].size()), B);
    const int64_t n = kv.size(0);
    // Prompt keys were all coded at prefill; decode keys once outside the local window.
    EXPECT_EQ(pq->index(0).codes.size(2), std::max<int64_t>(L - 4, n - 1 - 7 - 4));
    if (pq->index(0).storage.defined()) capacities.insert(pq->index(0).storage.size(2));
  }
  const PQIndex& index = pq->index(0);
  const int64_t N = index.codes.size(2);
  ASSERT_EQ(N, L - 4 + steps - 8);  // all but the last 8 decode tokens left the window
  EXPECT_EQ(capacities, (std::set<int64_t>{139, 237}));  // 60 + 15 + 64, then 139 + 34 + 64
  EXPECT_EQ(index.codes.data_ptr(), index.storage.data_ptr());
  EXPECT_TRUE(index.codes.narrow(2, 0, L - 4).equal(prompt_codes));
  // Decode tokens that left the window: codes = argmin over centroids of the squared distance,
  // per sub-space, computed here by brute force.
  at::Tensor keys = kv.keys(0);  // [n, d]
  for (int64_t j = L; j < 4 + N; ++j)
    for (int64_t i = 0; i < 2; ++i) {
      at::Tensor sub = keys[j].narrow(0, i * 4, 4);
      int64_t best = 0;
      double best_dist = 1e30;
      for (int64_t c = 0; c < index.centroids.size(2); ++c) {
        const double dist = (index.centroids[0][i][c] - sub).pow(2).sum().item<double>();
        if (dist < best_dist) best_dist = dist, best = c;
      }
      EXPECT_EQ(index.codes[0][i][j - 4].item<int64_t>(), best) << "token " << j;
    }
}

TEST(PQCache, SelectionIsSinksLocalTopKAndCurrent) {
  // d = 2, m = 1: keys on the unit circle; the query points at token 30's direction.
  const int64_t L = 64, d = 2;
  auto method = test::make_method("pqcache", {{"sinks", 2}, {"subspaces", 1}, {"bits", 6}});
  method->begin(test::context(1, 1, 1, d, 9, L));  // 2 sinks + 3 local + 3 top-k + 1
  at::Tensor angles = at::arange(L, at::kFloat) * (6.2831853f / float(L));
  at::Tensor k = at::stack({angles.cos(), angles.sin()}, 1).unsqueeze(0) * 8.0;  // [1, L, 2]
  at::Tensor v = at::zeros({1, L, d});
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v, 0);
  method->on_prefill(0, at::zeros({1, L, d}), k, v, kv);
  at::Tensor kt = at::zeros({1, d});
  kv.append(kt, kt, L);
  method->on_append(0, kt, kt, kv);
  Selection s = method->select(0, k[0][30].unsqueeze(0) * 4.0, kv);
  std::vector<int64_t> got = s.lists()[0];
  std::sort(got.begin(), got.end());
  // 62 keys <= 64 centroids: exact codes; top-3 by q.k are 29, 30, 31.
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 29, 30, 31, 61, 62, 63, 64}));
}

// The selection by code combination (pq_top_k's kernel, PQCache's default m = 2, b = 6: 4096
// combinations) picks what ATen's composition softmax(pq_scores).sum -> top-k picks, up to near
// ties, and of tokens with equal codes the earlier ones; so does the composition of the CPU
// kernels where the combinations are too many for it (b = 7). Codes from the K-means of random
// keys and codes over 3 values only (a few combinations of many tokens: the k-th among ties);
// q in fp32 and bf16; the codes a narrow view of a wider index, as PQCache reads them.
TEST(PQCache, TopKByCombinationIsTheCompositionsUpToNearTies) {
  at::manual_seed(9);
  const int64_t H = 4, g = 4, d = 32, n = 3000, lead = 8, trailing = 20;
  const double scale = 1.0 / std::sqrt(double(d));
  for (const int bits : {6, 7}) {
    const PQIndex index = pq_build(at::randn({H, n + 100, d}), 2, bits, 20, 1e-4, 3);
    const at::Tensor few = at::randint(0, 3, index.codes.sizes(), at::kByte);
    for (const at::Tensor& wide : {index.codes, few}) {
      const at::Tensor codes = wide.narrow(2, 0, n);  // [H, 2, n], rows n + 100 apart
      for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor q = at::randn({H, g, d}).to(dtype) * 2;
        for (const int64_t k : {int64_t(0), int64_t(1), int64_t(496), n}) {
          SCOPED_TRACE("b " + std::to_string(bits) + ", " + std::string(c10::toString(dtype)) +
                       ", codes < " + std::to_string(wide.max().item<int64_t>() + 1) + ", k " +
                       std::to_string(k));
          const at::Tensor got = pq_top_k(q, index.centroids, codes, scale, k, lead, trailing);
          ASSERT_EQ(got.sizes(), (std::vector<int64_t>{H, lead + k + trailing}));
          EXPECT_EQ(test::pq_selection_difference(got, q, index.centroids, codes, scale, k, lead,
                                                  trailing),
                    "");
        }
      }
    }
  }
}

// The reference's LFU (HugoZHL/PQCache lfu_cache.cc, traced by hand): the step's blocks are
// inserted one by one, and a new block evicts the least frequently used one, the earliest to
// reach that frequency, even one this step inserted: new blocks push each other out.
TEST(PQCache, LfuBlockCacheCountsHitsOnAHandCase) {
  LfuBlockCache cache(2);
  EXPECT_EQ(cache.access({0, 0, 1}), 0);  // cold: 0 (freq 1), then 1 (freq 1)
  EXPECT_EQ(cache.access({0, 2}), 1);     // 0 hits, freq 2; 2 evicts 1 (freq 1): {0:2, 2:1}
  EXPECT_TRUE(cache.contains(0));
  EXPECT_TRUE(cache.contains(2));
  EXPECT_FALSE(cache.contains(1));
  // 2 hits. 1 (2 tokens) goes in first and evicts 2 (freq 1, below 0's 2); then 2 evicts 1,
  // the least frequent block, inserted this very step.
  EXPECT_EQ(cache.access({1, 1, 2}), 1);
  EXPECT_TRUE(cache.contains(0));
  EXPECT_TRUE(cache.contains(2));
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.access({1, 1, 2}), 1);  // the same again: 1 never stays
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.access({0}), 1);  // 0 still there (freq 3)
  EXPECT_EQ(cache.size(), 2);
}

// cache_eviction: earlier_blocks: a new block evicts only blocks the step does not admit.
TEST(PQCache, LfuBlockCacheSparingTheStepsBlocksOnAHandCase) {
  LfuBlockCache cache(2, LfuBlockCache::Eviction::earlier_blocks);
  EXPECT_EQ(cache.access({0, 0, 1}), 0);  // cold: {0:1, 1:1}
  EXPECT_EQ(cache.access({0, 2}), 1);     // 0 hits; 2 evicts 1 (freq 1): {0:2, 2:1}
  EXPECT_TRUE(cache.contains(0));
  EXPECT_TRUE(cache.contains(2));
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.access({1, 1, 2}), 1);  // 2 hits; 1 evicts 0 (not used this step): {1:1, 2:2}
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(0));
  EXPECT_EQ(cache.access({0}), 0);  // 0 evicts the least frequent, 1: {0:1, 2:2}
  EXPECT_TRUE(cache.contains(2));
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.access({2, 2, 0, 5}), 3);
  EXPECT_EQ(cache.size(), 2);
}

// Both LFU rules written plainly for this test (maps and sets, every token looked up, victims
// found by a scan): the hits against the cache before the step, then the step's blocks
// admitted in turn, most referenced first (ties: lower id), at most `capacity`; a cached one's
// frequency grows, a new one evicts the least frequently used block (ties: the earliest to
// reach its frequency, by admission; with `spare_the_step` by step, then the lower id), with
// `spare_the_step` not one the step admits.
class PlainLfu {
 public:
  PlainLfu(size_t capacity, bool spare_the_step)
      : capacity_(capacity), spare_the_step_(spare_the_step) {}
  int64_t access(const std::vector<int64_t>& blocks) {
    int64_t hits = 0;
    std::map<int64_t, int64_t> references;
    for (int64_t b : blocks) {
      hits += frequency_.count(b) ? 1 : 0;
      ++references[b];
    }
    std::vector<std::pair<int64_t, int64_t>> order(references.begin(), references.end());
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (order.size() > capacity_) order.resize(capacity_);
    std::set<int64_t> admitted;
    for (const auto& entry : order) admitted.insert(entry.first);
    ++step_;
    for (const auto& entry : order) {
      const int64_t block = entry.first;
      ++admissions_;
      const int64_t time = spare_the_step_ ? step_ : admissions_;
      if (frequency_.count(block)) {
        ++frequency_[block];
        reached_[block] = time;
        continue;
      }
      if (frequency_.size() >= capacity_) {
        int64_t victim = -1;
        for (const auto& [b, f] : frequency_) {
          if (spare_the_step_ && admitted.count(b)) continue;
          if (victim < 0 || f < frequency_[victim] ||
              (f == frequency_[victim] && reached_[b] < reached_[victim]))
            victim = b;
        }
        frequency_.erase(victim);
        reached_.erase(victim);
      }
      frequency_[block] = 1;
      reached_[block] = time;
    }
    return hits;
  }
  bool contains(int64_t block) const { return frequency_.count(block) != 0; }

 private:
  size_t capacity_;
  bool spare_the_step_;
  int64_t admissions_ = 0, step_ = 0;
  std::map<int64_t, int64_t> frequency_, reached_;
};

// Random steps of few and of many blocks (ties in reference counts and in frequency; more
// distinct blocks a step than the cache holds, and fewer), capacities from 1 to 40, both
// rules: the same hits every step and the same blocks cached after it.
TEST(PQCache, LfuBlockCacheFollowsItsRule) {
  std::mt19937_64 random(5);
  for (const bool spare : {false, true})
    for (const int64_t capacity : {1, 2, 3, 8, 32, 40})
      for (const int64_t universe : {4, 50, 1100}) {
        SCOPED_TRACE(std::string(spare ? "earlier_blocks" : "any_block") + ", capacity " +
                     std::to_string(capacity) + ", blocks < " + std::to_string(universe));
        LfuBlockCache cache(capacity, spare ? LfuBlockCache::Eviction::earlier_blocks
                                            : LfuBlockCache::Eviction::any_block);
        PlainLfu plain(static_cast<size_t>(capacity), spare);
        for (int step = 0; step < 60; ++step) {
          std::vector<int64_t> blocks(static_cast<size_t>(1 + random() % 300));
          const int64_t hot = 1 + int64_t(random() % uint64_t(universe));  // often few blocks
          for (int64_t& b : blocks)
            b = int64_t(random() % uint64_t(step % 3 == 0 ? universe : hot));
          ASSERT_EQ(cache.access(blocks), plain.access(blocks)) << "step " << step;
          for (int64_t b = 0; b < universe; ++b)
            ASSERT_EQ(cache.contains(b), plain.contains(b)) << "step " << step << ", block " << b;
        }
      }
}

TEST(PQCache, CountsCacheAndIndexBytesInASession) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("pqcache");
  std::vector<int> prompt = {1};
  for (int i = 1; i < 300; ++i) prompt.push_back(3 + (i * 37) % 250);
  Session session(*model, *method, SessionOptions{.budget = 64});
  session.prefill(prompt);
  for (int t = 0; t < 3; ++t) session.decode(5 + t);
  auto c = method->counters();
  EXPECT_GT(c["index_bytes"], 0);
  EXPECT_GT(c["cache_lookups"], 0);
  EXPECT_GE(c["cache_hit_rate"], 0);
  EXPECT_LE(c["cache_hit_rate"], 1);
  EXPECT_NEAR(session.attended().sum[0] / 3.0, 64.0, 1e-9);
}

// Ratio mode compresses every prompt by its ratio, as the reference's pq_search.py: the cell's
// budget changes nothing (a B above the prompt's length attended every entry, as Full), and
// the derived count is reported.
TEST(PQCache, RatioModeIgnoresTheBudget) {
  auto model = LlamaModel::from_reference("random-tiny");
  std::vector<int> prompt = {1};
  for (int i = 1; i < 300; ++i) prompt.push_back(3 + (i * 37) % 250);
  const auto run = [&](int64_t budget) {
    auto method = test::make_method("pqcache", {{"ratio", 0.2}});
    Session session(*model, *method, SessionOptions{.budget = budget});
    session.prefill(prompt);
    for (int t = 0; t < 2; ++t) session.decode(5 + t);
    return std::make_pair(session.attended().sum[0] / 2.0, method->counters());
  };
  // sinks 32 + int(268 x 0.2 x 0.5) local 26 + 26 top-k + the current entry.
  const auto [small, small_counters] = run(16);
  const auto [large, large_counters] = run(4096);
  EXPECT_DOUBLE_EQ(small, 85.0);
  EXPECT_DOUBLE_EQ(large, 85.0);
  EXPECT_DOUBLE_EQ(large_counters.at("derived_budget"), 85.0);
  EXPECT_DOUBLE_EQ(small_counters.at("fetched_bytes_per_step"),
                   large_counters.at("fetched_bytes_per_step"));
}

// The selection is made on the device and the LFU cache counted later, in batches of steps
// (every layer's at once at the start of a step, on_decode_step, as a session calls it; or,
// where nothing calls it, a layer's own every 64 steps) and at counters(): the hits are those
// of counting every step as it ran (a replay of the selected entries through a fresh cache),
// over more steps than one batch.
TEST(PQCache, DeferredCacheCountingEqualsCountingEachStep) {
  test::expect_deferred_cache_counts(at::Device(at::kCPU));
}

TEST(PQCache, BadConfigsNameTheField) {
  for (const char* field : {"bits", "subspaces", "ratio", "local_share", "sinks", "max_iter",
                            "cache_block"}) {
    json bad = {{field, -1}};
    std::string e = test::suite_error({{"name", "pqcache"}, {"config", bad}}, {32});
    EXPECT_NE(e.find(field), std::string::npos) << field << ": " << e;
  }
  std::string e = test::suite_error({{"name", "pqcache"}, {"config", {{"bitz", 4}}}}, {32});
  EXPECT_NE(e.find("bitz"), std::string::npos) << e;
  e = test::suite_error("pqcache", {0});
  EXPECT_NE(e.find("budget"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvb
