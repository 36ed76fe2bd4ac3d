#include "methods/retrieval/clusterkv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/kernel_adapter.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// Keys in `groups` directions with random magnitudes and a little noise. Returns [H, n, d].
at::Tensor grouped_keys(int64_t H, int64_t per_group, int64_t groups, int64_t d) {
  at::Tensor dirs = at::randn({H, groups, 1, d});
  at::Tensor mags = at::rand({H, groups, per_group, 1}) * 4.0 + 0.5;
  at::Tensor noise = at::randn({H, groups, per_group, d}) * 0.05;
  return (dirs * mags + noise * mags).reshape({H, groups * per_group, d});
}

TEST(ClusterKV, KMeansConvergesToAFixedPointOfLloyd) {
  for (uint64_t seed : {0, 1, 2}) {
    at::manual_seed(seed);
    const int64_t H = 3, n = 60, d = 8, C = 4;
    at::Tensor keys = grouped_keys(H, 15, 4, d);
    KMeansResult r = cosine_kmeans(keys, C, seed, /*max_iterations=*/50);
    ASSERT_TRUE(r.converged) << seed;
    EXPECT_EQ(r.centroids.sizes(), (std::vector<int64_t>{H, C, d}));
    // One more Lloyd step changes nothing.
    at::Tensor centroids = cluster_means(keys, r.labels, r.centroids);
    EXPECT_TRUE(at::allclose(centroids, r.centroids, 1e-5, 1e-6)) << seed;
    EXPECT_TRUE(cosine_assign(keys, centroids).equal(r.labels)) << seed;
    // Independently: each key's label is its centroid of largest cosine, and each non-empty
    // centroid is the mean of its RAW members.
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        at::Tensor cos = at::cosine_similarity(keys[h][i].unsqueeze(0), r.centroids[h], 1);  // [C]
        EXPECT_EQ(cos.argmax().item<int64_t>(), r.labels[h][i].item<int64_t>());
      }
      for (int64_t c = 0; c < C; ++c) {
        at::Tensor members = keys[h].index({r.labels[h] == c});
        if (members.size(0) == 0) continue;
        EXPECT_TRUE(at::allclose(members.mean(0), r.centroids[h][c], 1e-5, 1e-5));
      }
    }
  }
}

// 99 keys near e_0 and one along e_1, 2 clusters. k-means|| (init: kmeans_parallel) puts the
// outlier in a cluster of its own from every seed here (100 of 100): it is the farthest key
// from any first pick, so the rounds take it (probability 2C d / psi) and the reduction keeps
// it. From 2 random keys (2 in 100 start with it) Lloyd's steps get there 46 times in 100.
TEST(ClusterKV, KMeansParallelStartsFromTheOutlier) {
  const int64_t d = 4, n = 100;
  int alone_parallel = 0, alone_random = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    at::manual_seed(int64_t(seed));
    at::Tensor keys = test::unit(0, d).repeat({n, 1}) + at::randn({n, d}) * 0.05;
    keys[n - 1] = test::unit(1, d);
    keys = keys.unsqueeze(0);  // [1, n, d]
    const auto outlier_alone = [&](const KMeansResult& r) {
      const at::Tensor labels = r.labels[0];
      return (labels == labels[n - 1]).sum().item<int64_t>() == 1;
    };
    const at::Tensor start = kmeans_parallel_init(keys, 2, seed);
    ASSERT_EQ(start.sizes(), (std::vector<int64_t>{1, 2, d}));
    ASSERT_TRUE(start.isfinite().all().item<bool>());
    alone_parallel += outlier_alone(cosine_kmeans_from(keys, start, 20));
    alone_random += outlier_alone(cosine_kmeans(keys, 2, seed, 20));
  }
  EXPECT_GE(alone_parallel, 90);
  EXPECT_LE(alone_random, 60);  // 46
}

// k-means|| with fewer candidates than clusters tops them up with other keys: C = n gives every
// key, once; and one seed gives one start.
TEST(ClusterKV, KMeansParallelCoversEveryKeyWhenCIsN) {
  at::manual_seed(3);
  const at::Tensor keys = grouped_keys(2, 5, 2, 6);  // [2, 10, 6]
  const at::Tensor start = kmeans_parallel_init(keys, 10, 7);
  for (int64_t h = 0; h < 2; ++h) {
    const at::Tensor sorted_start = std::get<0>(start[h].sum(1).sort());
    const at::Tensor sorted_keys = std::get<0>(keys[h].sum(1).sort());
    EXPECT_TRUE(at::allclose(sorted_start, sorted_keys)) << h;
  }
  EXPECT_TRUE(kmeans_parallel_init(keys, 3, 7).equal(kmeans_parallel_init(keys, 3, 7)));
}

// kmeans_dtype: keys. The products run in the keys' dtype: centroids [1, 0.01] and [1, 0] score
// key [1, 0] as 0.99995 and 1 in fp32, both 1 in bf16 (whose spacing below 1 is 2^-8), where
// the tie goes to the lower id.
TEST(ClusterKV, AssignmentProductsRunInTheKeysDtype) {
  const at::Tensor centroids = at::tensor({1.0f, 0.01f, 1.0f, 0.0f}).reshape({1, 2, 2});
  const at::Tensor key = at::tensor({1.0f, 0.0f}).reshape({1, 1, 2});
  for (const KernelPath path : {KernelPath::kAuto, KernelPath::kAten}) {
    EXPECT_EQ(cosine_assign(key, centroids, path).item<int64_t>(), 1);
    EXPECT_EQ(cosine_assign(key.to(at::kBFloat16), centroids, path).item<int64_t>(), 0);
  }
}

// fp32 keys give the same clustering both ways. bf16 keys: a fixed point of Lloyd's steps with
// bf16 products, whose every label is a centroid of largest fp32 cosine up to bf16 rounding
// (about 3 x 2^-8 of a product of norm 1) and whose centroids are the fp32 means of the members.
// (Not fp32's partition: near ties, such as a group split between two centroids, fall either
// way, and Lloyd's steps then part.)
TEST(ClusterKV, KMeansInTheKeysDtype) {
  for (uint64_t seed : {0, 1, 2}) {
    at::manual_seed(seed);
    const int64_t H = 3, n = 120, d = 16, C = 4;
    const at::Tensor keys = grouped_keys(H, 30, 4, d);
    const KMeansResult f = cosine_kmeans(keys, C, seed, 50);
    const KMeansResult same = cosine_kmeans(keys, C, seed, 50, /*products_in_keys_dtype=*/true);
    EXPECT_TRUE(same.labels.equal(f.labels)) << seed;
    EXPECT_TRUE(same.centroids.equal(f.centroids)) << seed;

    const at::Tensor kb = keys.to(at::kBFloat16);
    const KMeansResult b = cosine_kmeans(kb, C, seed, 50, true);
    ASSERT_TRUE(b.converged) << seed;
    ASSERT_EQ(b.centroids.scalar_type(), at::kFloat);
    const at::Tensor widened = kb.to(at::kFloat);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        const at::Tensor cos = at::cosine_similarity(widened[h][i].unsqueeze(0), b.centroids[h], 1);
        EXPECT_GE(cos[b.labels[h][i].item<int64_t>()].item<float>(), cos.max().item<float>() - 0.02f)
            << seed << " " << h << " " << i;
      }
      for (int64_t c = 0; c < C; ++c) {
        const at::Tensor members = widened[h].index({b.labels[h] == c});
        if (members.size(0) == 0) continue;
        EXPECT_TRUE(at::allclose(members.mean(0), b.centroids[h][c], 1e-5, 1e-5)) << seed;
      }
    }
  }
}

// build: overlap's K-means (the efficiency code's): exactly max_iterations steps, no test of
// convergence. Past convergence the steps repeat themselves, so the result is the converged
// one, bit for bit on the CPU; stopped before it, it is not.
TEST(ClusterKV, FixedStepsRepeatAConvergedClustering) {
  for (uint64_t seed : {0, 1, 2}) {
    at::manual_seed(seed);
    const at::Tensor keys = grouped_keys(3, 20, 5, 8);
    const KMeansResult converged = cosine_kmeans(keys, 5, seed, 50);
    ASSERT_TRUE(converged.converged) << seed;
    ASSERT_LT(converged.iterations, 50) << seed;
    const KMeansResult fixed = cosine_kmeans(keys, 5, seed, 50, false, /*stop_when_converged=*/false);
    EXPECT_EQ(fixed.iterations, 50) << seed;
    EXPECT_FALSE(fixed.converged) << seed;
    EXPECT_TRUE(fixed.labels.equal(converged.labels)) << seed;
    EXPECT_TRUE(fixed.centroids.equal(converged.centroids)) << seed;
  }
  // Random keys need several steps: one step alone leaves another clustering.
  at::manual_seed(9);
  const at::Tensor keys = at::randn({2, 200, 8});
  const KMeansResult converged = cosine_kmeans(keys, 6, 9, 50);
  ASSERT_GT(converged.iterations, 2);
  const KMeansResult one = cosine_kmeans(keys, 6, 9, 1, false, false);
  EXPECT_EQ(one.iterations, 1);
  EXPECT_FALSE(one.centroids.equal(converged.centroids));
}

TEST(ClusterKV, EmptyClusterKeepsItsCentroid) {
  at::Tensor keys = at::tensor({1.0f, 0.0f, 3.0f, 0.0f, 0.0f, 2.0f}).reshape({1, 3, 2});
  at::Tensor labels = at::tensor({0, 0, 2}, at::kLong).reshape({1, 3});
  at::Tensor old = at::tensor({9.0f, 9.0f, 7.0f, 7.0f, 5.0f, 5.0f}).reshape({1, 3, 2});
  at::Tensor c = cluster_means(keys, labels, old);
  at::Tensor expected = at::tensor({2.0f, 0.0f, 7.0f, 7.0f, 0.0f, 2.0f}).reshape({1, 3, 2});
  EXPECT_TRUE(at::equal(c, expected)) << c;
}

TEST(ClusterKV, MetadataAndSelectionFollowFigure8) {
  // Fig. 8: k0, k5 in cluster 2; k1 in cluster 0; k2, k3, k4 in cluster 1.
  at::Tensor labels = at::tensor({2, 0, 1, 1, 1, 2}, at::kLong).reshape({1, 6});
  ClusterMetadata m = cluster_metadata(labels, 3, /*index_offset=*/16);
  EXPECT_TRUE(m.sizes.equal(at::tensor({1, 3, 2}, at::kLong).reshape({1, 3})));
  EXPECT_TRUE(m.starts.equal(at::tensor({0, 1, 4}, at::kLong).reshape({1, 3})));
  EXPECT_TRUE(
      m.sorted_indices.equal(at::tensor({17, 18, 19, 20, 16, 21}, at::kLong).reshape({1, 6})));
  // q.mu ranks the clusters 2, 0, 1. Budget 3 = sizes of clusters 2 and 0.
  at::Tensor scores = at::tensor({0.5f, -1.0f, 2.0f}).reshape({1, 3});
  auto select = [&](int64_t take) {
    at::Tensor s = clusterkv_select(scores, m.sizes, m.starts, m.sorted_indices, take)[0];
    return std::vector<int64_t>(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
  };
  EXPECT_EQ(select(3), (std::vector<int64_t>{16, 21, 17}));
  // Budget 5: cluster 1 is trimmed to its first 2 members.
  EXPECT_EQ(select(5), (std::vector<int64_t>{16, 21, 17, 18, 19}));
  EXPECT_EQ(select(2), (std::vector<int64_t>{16, 21}));
  EXPECT_EQ(select(9), (std::vector<int64_t>{16, 21, 17, 18, 19, 20}));  // all 6, no more
  // Ties rank the lower id first; an empty cluster (size 0) is skipped.
  at::Tensor tied = at::tensor({1.0f, 1.0f, 1.0f, 5.0f}).reshape({1, 4});
  at::Tensor sizes = at::tensor({1, 3, 2, 0}, at::kLong).reshape({1, 4});
  at::Tensor starts = at::tensor({0, 1, 4, 6}, at::kLong).reshape({1, 4});
  at::Tensor s = clusterkv_select(tied, sizes, starts, m.sorted_indices, 5)[0];
  EXPECT_TRUE(s.equal(at::tensor({17, 18, 19, 20, 16}, at::kLong))) << s;
}

// Runs clusterkv on one sparse layer (layer 2 of 3): prefill of keys `k` [1, L, d], then
// decode tokens. Hq = 2, Hkv = 1.
struct Driver {
  std::unique_ptr<Method> method;
  LayerKV kv;
  int64_t position = 0;
  Driver(const json& config, const at::Tensor& k, int64_t budget)
      : method(test::make_method("clusterkv", config)), kv(1, k.size(2), at::kFloat) {
    const int64_t L = k.size(1), d = k.size(2);
    method->begin(test::context(3, 2, 1, int(d), budget, L));
    at::Tensor v = at::randn({1, L, d});
    kv.append_many(k, v, 0);
    method->on_prefill(2, at::randn({2, L, d}), k, v, kv);
    position = L;
  }
  // Every list of the step's selection (one per KV head, or per query head), each sorted.
  std::vector<std::vector<int64_t>> step_lists(const at::Tensor& kt /*[1, d]*/,
                                               const at::Tensor& q /*[2, d]*/) {
    at::Tensor vt = at::randn({1, kt.size(1)});
    kv.append(kt, vt, position++);
    method->on_append(2, kt, vt, kv);
    Selection s = method->select(2, q, kv);
    EXPECT_FALSE(s.all);
    std::vector<std::vector<int64_t>> lists = s.lists();
    for (std::vector<int64_t>& list : lists) std::sort(list.begin(), list.end());
    return lists;
  }
  std::vector<int64_t> step(const at::Tensor& kt, const at::Tensor& q) {
    return step_lists(kt, q)[0];
  }
};

// The first decode step: sinks + clusters ranked by q_sum.mu (q0 + q1, or with per_query_head
// each query head's own q), the last trimmed, + the current token; `take` clustered entries.
void check_first_step(const std::string& recent, int64_t take, int64_t expected_size,
                      const std::string& gqa = "per_kv_head") {
  at::manual_seed(3);
  const int64_t d = 8, sinks = 16, C = 5, B = 48;
  at::Tensor k = at::cat({at::randn({1, sinks, d}) * 10.0, grouped_keys(1, 20, 5, d)}, 1);
  const int64_t L = k.size(1);  // 116
  Driver drv({{"clusters", C}, {"recent", recent}, {"gqa", gqa}}, k, B);
  at::Tensor q = at::randn({2, d});
  if (gqa == "per_query_head") q[1] = -q[0];  // opposite rankings: the two lists must differ
  const std::vector<std::vector<int64_t>> lists = drv.step_lists(at::randn({1, d}), q);
  ASSERT_EQ(lists.size(), gqa == "per_query_head" ? 2u : 1u);
  if (lists.size() == 2) {
    EXPECT_NE(lists[0], lists[1]);
  }
  for (size_t unit = 0; unit < lists.size(); ++unit) {
  const std::vector<int64_t>& sel = lists[unit];

  // Independently: the same K-means (same seed), ranked by q_sum.mu.
  KMeansResult r = cosine_kmeans(k.narrow(1, sinks, L - sinks), C, clusterkv_seed(0, 2, 0), 20);
  const at::Tensor q_sum = lists.size() == 2 ? q[int64_t(unit)] : q.sum(0);
  at::Tensor score = at::matmul(r.centroids[0], q_sum);  // [C]
  std::vector<int64_t> order(C);
  for (int64_t c = 0; c < C; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return score[a].item<float>() > score[b].item<float>();
  });
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < sinks; ++i) expected.push_back(i);  // sinks
  int64_t left = take;
  for (int64_t c : order)
    for (int64_t i = 0; i < L - sinks && left > 0; ++i)
      if (r.labels[0][i].item<int64_t>() == c) {
        expected.push_back(sinks + i);
        --left;
      }
  expected.push_back(L);  // the current token
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sel, expected) << recent << " " << gqa << " unit " << unit;
  EXPECT_EQ(int64_t(sel.size()), expected_size) << recent;
  }
}

TEST(ClusterKV, SelectionCoversClustersInOrderOfQDotCentroid) {
  // The reference: B - sinks = 32 clustered entries, the current token on top: B + 1.
  check_first_step("on_top", 32, 49);
  // in_budget: the current token takes one of B's slots.
  check_first_step("in_budget", 31, 48);
  // The accuracy code (preset sjtu-zhao-lab): each query head its own ranking and selection.
  check_first_step("on_top", 32, 49, "per_query_head");
}

TEST(ClusterKV, ReclusteringAfterMStepsAddsCPlusClusters) {
  at::manual_seed(4);
  const int64_t d = 8, m = 8, B = 40;
  at::Tensor k = at::randn({1, 80, d});
  Driver drv({{"clusters", 3}, {"decode_interval", m}, {"decode_clusters", 2}}, k, B);
  EXPECT_EQ(drv.method->counters().at("clusters_per_head"), 3.0);
  // Decode keys along a new direction, much larger than the prompt's.
  at::Tensor dir = at::randn({1, d});
  at::Tensor q = dir.repeat({2, 1});
  for (int64_t t = 0; t < m; ++t) {
    std::vector<int64_t> sel = drv.step(dir * (20.0 + double(t)), q);
    EXPECT_EQ(int64_t(sel.size()), B + t + 1);  // every unclustered token on top of B
    for (int64_t i = 0; i < 16; ++i) EXPECT_TRUE(std::binary_search(sel.begin(), sel.end(), i));
    for (int64_t p = 80; p <= 80 + t; ++p)  // every recent token, the current one included
      EXPECT_TRUE(std::binary_search(sel.begin(), sel.end(), p)) << p;
  }
  EXPECT_EQ(drv.method->counters().at("clusters_per_head"), 3.0);
  // The (m+1)-th token: the m earlier decode tokens become C+ = 2 clusters.
  std::vector<int64_t> sel = drv.step(dir * 30.0, q);
  EXPECT_EQ(drv.method->counters().at("clusters_per_head"), 5.0);
  EXPECT_EQ(int64_t(sel.size()), B + 1);  // one unclustered token left: the current one
  // They rank first for a query along their direction, so all m are still selected.
  for (int64_t p = 80; p <= 80 + m; ++p)
    EXPECT_TRUE(std::binary_search(sel.begin(), sel.end(), p)) << p;
}

// decode_interval: 0, the accuracy code's: no decode token is ever clustered; step t attends
// B + t entries, every decode token among them.
TEST(ClusterKV, DecodeInterval0NeverClustersDecodeTokens) {
  at::manual_seed(4);
  const int64_t d = 8, B = 40, steps = 12;
  at::Tensor k = at::randn({1, 80, d});
  Driver drv({{"clusters", 3}, {"decode_interval", 0}, {"decode_clusters", 8}}, k, B);
  at::Tensor dir = at::randn({1, d});
  at::Tensor q = dir.repeat({2, 1});
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<int64_t> sel = drv.step(dir * (20.0 + double(t)), q);
    EXPECT_EQ(int64_t(sel.size()), B + t + 1);
    for (int64_t p = 80; p <= 80 + t; ++p)
      EXPECT_TRUE(std::binary_search(sel.begin(), sel.end(), p)) << p;
  }
  EXPECT_EQ(drv.method->counters().at("clusters_per_head"), 3.0);
}

// 16 sinks, then two groups of 12 keys: along e_0 (entries 16..27) and along e_1 (28..39),
// which cosine K-means with 2 clusters separates whatever its initial centroids.
at::Tensor two_groups(int64_t d) {
  at::Tensor k = at::zeros({1, 40, d});
  for (int64_t i = 0; i < 16; ++i) k[0][i] = test::unit(3, d) * 8.0;
  for (int64_t i = 16; i < 28; ++i) k[0][i] = test::unit(0, d) * (1.0 + 0.1 * double(i));
  for (int64_t i = 28; i < 40; ++i) k[0][i] = test::unit(1, d) * (1.0 + 0.1 * double(i));
  return k;
}

// After 6 decode steps at B = 20 (16 sinks + 4), the query along e_1. Decode keys along e_2.
std::vector<int64_t> after_six_steps(const std::string& recent) {
  const int64_t d = 4;
  Driver drv({{"clusters", 2}, {"recent", recent}}, two_groups(d), 20);
  const at::Tensor q = at::stack({test::unit(1, d), test::unit(1, d)});  // [2, d]
  std::vector<int64_t> sel;
  for (int t = 0; t < 6; ++t) sel = drv.step(test::unit(2, d).unsqueeze(0), q);
  return sel;
}

TEST(ClusterKV, RecentTokensOnTopKeepRetrievingClustersAtSmallBudgets) {
  // on_top (the reference): sinks + the first B - 16 = 4 members of the e_1 cluster (28..31) +
  // all six decode tokens (40..45).
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 16; ++i) expected.push_back(i);
  for (int64_t p = 28; p < 32; ++p) expected.push_back(p);
  for (int64_t p = 40; p < 46; ++p) expected.push_back(p);
  EXPECT_EQ(after_six_steps("on_top"), expected);
}

TEST(ClusterKV, RecentTokensInBudgetCrowdOutTheClusters) {
  // in_budget: the 4 newest decode tokens fill B - 16; no cluster is attended any more.
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 16; ++i) expected.push_back(i);
  for (int64_t p = 42; p <= 45; ++p) expected.push_back(p);
  EXPECT_EQ(after_six_steps("in_budget"), expected);
}

// build: overlap on the CPU runs the same steps on the one stream there is, from the initial
// positions it drew for every layer in begin() (inline draws each layer's in on_prefill): the
// same clusters, so the same selections at every step, through a decode-time clustering
// (every 8 tokens here) and its new clusters.
TEST(ClusterKV, OverlapBuildSelectsAsTheInlineBuild) {
  at::manual_seed(11);
  const int64_t d = 8;
  const at::Tensor k = at::cat({at::randn({1, 16, d}), grouped_keys(1, 30, 4, d)}, 1);
  const json inline_build = {{"clusters", 4}, {"decode_interval", 8}, {"decode_clusters", 2}};
  json overlap = inline_build;
  overlap["build"] = "overlap";
  at::manual_seed(12);
  Driver a(inline_build, k, 40);
  at::manual_seed(12);
  Driver b(overlap, k, 40);
  for (int t = 0; t < 20; ++t) {
    const at::Tensor kt = at::randn({1, d}) * 3.0, q = at::randn({2, d});
    EXPECT_EQ(b.step(kt, q), a.step(kt, q)) << t;
  }
  EXPECT_EQ(b.method->counters().at("clusters_per_head"), 4.0 + 2 * 2.0);
  // Keys without groups, two Lloyd steps: the clusters depend on the initial positions, which
  // overlap drew for every layer in begin(), inline in on_prefill.
  const at::Tensor scattered = at::randn({1, 200, d});
  const json few_steps = {{"clusters", 12}, {"max_iterations", 2}};
  json few_steps_overlap = few_steps;
  few_steps_overlap["build"] = "overlap";
  Driver c(few_steps, scattered, 60), e(few_steps_overlap, scattered, 60);
  for (int t = 0; t < 4; ++t) {
    const at::Tensor kt = at::randn({1, d}), q = at::randn({2, d});
    EXPECT_EQ(e.step(kt, q), c.step(kt, q)) << t;
  }
  // The efficiency code's settings by name.
  const json efficiency = resolve_method("clusterkv:efficiency", json::object(), "t", "t.c").config;
  EXPECT_EQ(efficiency.at("build"), "overlap");
  EXPECT_EQ(efficiency.at("kmeans_dtype"), "keys");
  EXPECT_EQ(efficiency.at("max_iterations"), 20);
  EXPECT_EQ(efficiency.at("clusters"), 200);        // bench_textgen.py's --nlist
  EXPECT_EQ(efficiency.at("decode_clusters"), 8);   // its --window_nlist
  EXPECT_EQ(efficiency.at("decode_interval"), 320);  // its --window
}

TEST(ClusterKV, ClusterCountIsLOver80OrFixed) {
  at::manual_seed(8);
  const int64_t d = 4, L = 416;  // 16 sinks + 400 clustered keys
  const at::Tensor k = at::randn({1, L, d});
  auto clusters = [&](const json& config) {
    Driver drv(config, k, 64);
    return drv.method->counters().at("clusters_per_head");
  };
  EXPECT_EQ(clusters(json::object()), 5.0);          // the paper: L / 80 = 5
  EXPECT_EQ(clusters({{"clusters", "L/40"}}), 10.0);  // L / 40
  EXPECT_EQ(clusters({{"clusters", 7}}), 7.0);        // fixed
  EXPECT_EQ(clusters({{"clusters", 400}}), 400.0);    // the code's C0: one key per cluster here
  EXPECT_EQ(clusters({{"clusters", 1000}}), 400.0);   // capped by the keys to cluster
  // Both spellings survive normalisation.
  const MethodInfo& info = method_registry().get("clusterkv", "test");
  EXPECT_EQ(info.normalise_config(json::object(), "c").at("clusters"), "L/80");
  EXPECT_EQ(info.normalise_config({{"clusters", "L/40"}}, "c").at("clusters"), "L/40");
  EXPECT_EQ(info.normalise_config({{"clusters", 400}}, "c").at("clusters"), 400);
  EXPECT_EQ(info.normalise_config(json::object(), "c").at("recent"), "on_top");
  // The code's values, by name.
  const json code = resolve_method("clusterkv:sjtu-zhao-lab", json::object(), "t", "t.c").config;
  EXPECT_EQ(code.at("clusters"), 400);
  EXPECT_EQ(code.at("decode_interval"), 0);  // its accuracy code clusters the prompt only
  EXPECT_EQ(code.at("init"), "kmeans_parallel");  // pylibraft's fit starts from k-means||
  EXPECT_EQ(code.at("recent"), "on_top");
}

// Hits counted by hand from the selections themselves: a clustered entry selected now is a hit
// when it was selected in one of the last R steps.
void check_cache(int64_t R) {
  at::manual_seed(6);
  const int64_t d = 8, L = 96, B = 40;
  Driver drv({{"clusters", 6}, {"cache_steps", R}}, grouped_keys(1, 16, 6, d), B);
  at::Tensor qa = at::randn({2, d}), qb = at::randn({2, d});
  std::vector<std::set<int64_t>> history;
  int64_t hits = 0, lookups = 0;
  for (const at::Tensor& q : {qa, qa, qb, qa, qb, qb}) {
    std::vector<int64_t> sel = drv.step(at::randn({1, d}), q);
    std::set<int64_t> clustered;
    for (int64_t e : sel)
      if (e >= 16 && e < L) clustered.insert(e);
    for (int64_t e : clustered) {
      bool hit = false;
      for (int64_t back = 1; back <= R && back <= int64_t(history.size()); ++back)
        hit = hit || history[history.size() - back].count(e);
      hits += hit;
    }
    lookups += int64_t(clustered.size());
    history.push_back(clustered);
  }
  auto c = drv.method->counters();
  EXPECT_EQ(c.at("cache_lookups"), double(lookups)) << R;
  EXPECT_EQ(c.at("cache_hits"), double(hits)) << R;
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, lookups);
}

TEST(ClusterKV, CacheOfTheLastRStepsCountsHits) {
  check_cache(1);
  check_cache(2);
}

// The paper's cluster-granularity count (accuracy/cluster_cache_simulator.py), by hand from the
// selections: 5 groups of 20 keys after the 16 sinks, along orthogonal directions, which
// k-means|| starts apart, so each cluster is one group; a selected cluster is one the step's
// list reaches; from step R + 1, a hit is a cluster that one of the last R steps selected. Per
// query head, every head counts as many clusters as the head that needs most.
void check_cluster_cache(int64_t R, const std::string& gqa) {
  at::manual_seed(3);
  const int64_t d = 8, sinks = 16, per = 20, groups = 5, B = 48;
  at::Tensor dirs = at::eye(d).narrow(0, 0, groups).reshape({1, groups, 1, d});
  at::Tensor grouped = (dirs + at::randn({1, groups, per, d}) * 0.05) *
                       (at::rand({1, groups, per, 1}) * 4.0 + 0.5);
  at::Tensor k = at::cat({at::randn({1, sinks, d}) * 10.0, grouped.reshape({1, groups * per, d})}, 1);
  const int64_t L = k.size(1);
  Driver drv({{"clusters", groups}, {"cache_steps", R}, {"gqa", gqa}, {"init", "kmeans_parallel"},
              {"cluster_hit_rate", true}},
             k, B);
  std::vector<at::Tensor> qs;
  for (int i = 0; i < 3; ++i) qs.push_back(at::randn({2, d}));
  std::vector<std::vector<std::set<int64_t>>> history;  // per step, per unit: clusters selected
  int64_t hits = 0, lookups = 0;
  for (int step : {0, 0, 1, 0, 2, 1, 1, 2}) {
    std::vector<std::set<int64_t>> now;
    size_t most = 0;
    for (const std::vector<int64_t>& list : drv.step_lists(at::randn({1, d}), qs[step])) {
      std::set<int64_t> clusters;
      for (int64_t e : list)
        if (e >= sinks && e < L) clusters.insert((e - sinks) / per);
      most = std::max(most, clusters.size());
      now.push_back(clusters);
    }
    if (int64_t(history.size()) >= R) {
      lookups += int64_t(now.size() * most);
      for (size_t u = 0; u < now.size() && gqa == "per_kv_head"; ++u)
        for (int64_t c : now[u]) {
          bool hit = false;
          for (int64_t back = 1; back <= R; ++back)
            hit = hit || history[history.size() - back][u].count(c);
          hits += hit;
        }
    }
    history.push_back(now);
  }
  auto c = drv.method->counters();
  EXPECT_EQ(c.at("cluster_cache_lookups"), double(lookups)) << R << gqa;
  if (gqa == "per_kv_head") {
    EXPECT_EQ(c.at("cluster_cache_hits"), double(hits)) << R;
  }
  EXPECT_GT(c.at("cluster_cache_hits"), 0) << R << gqa;
  EXPECT_LT(c.at("cluster_cache_hits"), c.at("cluster_cache_lookups")) << R << gqa;
  EXPECT_DOUBLE_EQ(c.at("cluster_cache_hit_rate"),
                   c.at("cluster_cache_hits") / c.at("cluster_cache_lookups"));
}

// Steps that attend everything select nothing and do not advance the cluster count's clock: a
// prompt shorter than B attends every cluster once sparse, so after its first selection every
// lookup hits (a clock of decode steps would count that first selection's lookups as misses).
TEST(ClusterKV, ClusterCacheClockCountsSelectionsNotSteps) {
  at::manual_seed(3);
  const int64_t d = 8, B = 120;
  at::Tensor k = at::cat({at::randn({1, 16, d}) * 10.0, grouped_keys(1, 20, 5, d)}, 1);  // 116
  Driver drv({{"clusters", 5}, {"cluster_hit_rate", true}}, k, B);
  int64_t sparse = 0;
  for (int step = 0; step < 8; ++step) {
    at::Tensor kt = at::randn({1, d}), vt = at::randn({1, d});
    drv.kv.append(kt, vt, drv.position++);
    drv.method->on_append(2, kt, vt, drv.kv);
    sparse += !drv.method->select(2, at::randn({2, d}), drv.kv).all;
  }
  ASSERT_EQ(sparse, 4);  // n = 121..124 > B
  const auto c = drv.method->counters();
  EXPECT_EQ(c.at("cluster_cache_lookups"), double((sparse - 1) * 5));
  EXPECT_EQ(c.at("cluster_cache_hits"), c.at("cluster_cache_lookups"));
}

TEST(ClusterKV, ClusterCacheCountsThePapersHitRate) {
  {  // asked for only: about 20 operators a layer a step
    at::manual_seed(3);
    Driver drv({{"clusters", 4}}, grouped_keys(1, 20, 4, 8), 40);
    for (int i = 0; i < 3; ++i) drv.step(at::randn({1, 8}), at::randn({2, 8}));
    EXPECT_TRUE(drv.method->counters().count("cache_lookups"));
    EXPECT_FALSE(drv.method->counters().count("cluster_cache_lookups"));
  }
  check_cluster_cache(1, "per_kv_head");
  check_cluster_cache(2, "per_kv_head");
  check_cluster_cache(1, "per_query_head");
}

TEST(ClusterKV, BadConfigsFailAtValidationNamingTheField) {
  std::string e = test::suite_error({{"name", "clusterkv"}, {"config", {{"sinks", 32}}}}, {32});
  EXPECT_NE(e.find("sinks"), std::string::npos) << e;
  for (const json& bad : {json(-1), json(0), json(2.5), json("L/0"), json("L/"), json("400"),
                          json("L/8x"), json("K/80")}) {
    e = test::suite_error({{"name", "clusterkv"}, {"config", {{"clusters", bad}}}}, {64});
    EXPECT_NE(e.find("clusters: expected a count >= 1 or \"L/<k>\""), std::string::npos) << e;
  }
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"recent", "window"}}}}, {64});
  EXPECT_NE(e.find("recent"), std::string::npos) << e;
  e = test::suite_error(
      {{"name", "clusterkv"}, {"config", {{"decode_interval", 4}, {"decode_clusters", 8}}}}, {64});
  EXPECT_NE(e.find("decode_clusters"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"max_iterations", 0}}}}, {64});
  EXPECT_NE(e.find("max_iterations"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"cache_steps", -1}}}}, {64});
  EXPECT_NE(e.find("cache_steps"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"kmeans_dtype", "bf16"}}}}, {64});
  EXPECT_NE(e.find("kmeans_dtype"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"build", "side_stream"}}}}, {64});
  EXPECT_NE(e.find("build"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"init", "kmeans++"}}}}, {64});
  EXPECT_NE(e.find("init"), std::string::npos) << e;
  e = test::suite_error(
      {{"name", "clusterkv"}, {"config", {{"init", "kmeans_parallel"}, {"build", "overlap"}}}},
      {64});
  EXPECT_NE(e.find("init: kmeans_parallel reads the device on the host"), std::string::npos) << e;
  e = test::suite_error({{"name", "clusterkv"}, {"config", {{"decode_intervall", 4}}}}, {64});
  EXPECT_NE(e.find("decode_intervall"), std::string::npos) << e;
  e = test::suite_error("clusterkv", {16});
  EXPECT_NE(e.find("budget"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvb
