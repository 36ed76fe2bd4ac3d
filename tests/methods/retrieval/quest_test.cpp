#include "methods/retrieval/quest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/kernel_adapter.h"
#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// Brute force: score[p] = sum_c max(q_c * max_{i in p} k_ic, q_c * min_{i in p} k_ic).
double brute_page_score(const at::Tensor& q, const at::Tensor& keys, int64_t first, int64_t count) {
  double s = 0;
  for (int64_t c = 0; c < q.size(0); ++c) {
    double lo = 1e30, hi = -1e30;
    for (int64_t i = first; i < first + count; ++i) {
      lo = std::min(lo, keys[i][c].item<double>());
      hi = std::max(hi, keys[i][c].item<double>());
    }
    const double qc = q[c].item<double>();
    s += std::max(qc * lo, qc * hi);
  }
  return s;
}

TEST(Quest, PageScoresEqualBruteForceAndBoundEveryKey) {  // the kernel (auto) and ATen paths
  for (KernelPath path : {KernelPath::kAuto, KernelPath::kAten})
  for (uint64_t seed : {1, 2, 3, 4}) {
    at::manual_seed(seed);
    const int64_t H = 2, g = 2, n = 53, d = 8, page = 16;  // 4 pages, the last with 5 entries
    at::Tensor k = at::randn({H, n, d});
    at::Tensor q = at::randn({H, g, d});
    auto [kmin, kmax] = quest_page_summaries(k, page);
    ASSERT_EQ(kmin.size(1), 4);
    at::Tensor scores = quest_page_scores(q, kmin, kmax, false, path);  // [H, g, P]
    EXPECT_TRUE(at::allclose(quest_page_scores(q, kmin, kmax, true, path), scores.sum(1, true),
                             1e-5, 1e-5));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < g; ++j)
        for (int64_t p = 0; p < 4; ++p) {
          const int64_t first = p * page, count = std::min(page, n - first);
          const double s = scores[h][j][p].item<double>();
          EXPECT_NEAR(s, brute_page_score(q[h][j], k[h], first, count), 1e-4)
              << "seed " << seed << " page " << p;
          for (int64_t i = first; i < first + count; ++i)
            EXPECT_LE(at::dot(q[h][j], k[h][i]).item<double>(), s + 1e-4);
        }
  }
}

TEST(Quest, SelectionTakesRankedPagesAndAlwaysTheCurrentPage) {
  // n = 70: pages 0..3 full, page 4 (current) holds 6 entries.
  const std::vector<int64_t> ranking = {2, 0, 3, 1};
  // B = 32: current page (6) + whole page 2 (16) + the first 10 entries of page 0.
  std::vector<int64_t> sel = quest_select_pages(ranking, 70, 16, 32, /*fill_budget=*/true);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 10; ++i) expected.push_back(i);
  for (int64_t i = 32; i < 48; ++i) expected.push_back(i);
  for (int64_t i = 64; i < 70; ++i) expected.push_back(i);
  EXPECT_EQ(sel, expected);
  // The reference kernel: floor(32/16) = 2 pages in all, the current one among them.
  sel = quest_select_pages(ranking, 70, 16, 32, /*fill_budget=*/false);
  expected.assign({});
  for (int64_t i = 32; i < 48; ++i) expected.push_back(i);
  for (int64_t i = 64; i < 70; ++i) expected.push_back(i);
  EXPECT_EQ(sel, expected);
  // B = 16 with a current page of 16 entries: only the current page.
  sel = quest_select_pages({0, 1, 2}, 64, 16, 16, true);
  EXPECT_EQ(sel.size(), 16u);
  EXPECT_EQ(sel.front(), 48);
  // B = 47 on the kernel path: still 2 pages (6 + 16 entries).
  sel = quest_select_pages(ranking, 70, 16, 47, false);
  EXPECT_EQ(sel.size(), 22u);
}

TEST(Quest, EvaluationPathTakesMax3OrBOver16PagesPerQueryHeadCurrentNotForced) {
  // n = 70: pages 0..3 full, page 4 (current) holds 6 entries; rankings over all 5 pages.
  auto entries = [](std::initializer_list<int64_t> pages) {
    std::vector<int64_t> out;
    for (int64_t p : pages)
      for (int64_t i = p * 16; i < std::min<int64_t>(70, (p + 1) * 16); ++i) out.push_back(i);
    return out;
  };
  // B = 32: max(3, 2) = 3 pages, the current one among them when it ranks.
  EXPECT_EQ(quest_evaluation_pages({2, 4, 0, 3, 1}, 70, 16, 32), entries({0, 2, 4}));
  // ... and not when it does not: the current token goes unattended, as in the reference.
  EXPECT_EQ(quest_evaluation_pages({2, 0, 3, 4, 1}, 70, 16, 32), entries({0, 2, 3}));
  // B = 64: 4 pages.
  EXPECT_EQ(quest_evaluation_pages({1, 0, 2, 3, 4}, 70, 16, 64), entries({0, 1, 2, 3}));
  // B = 8 still takes 3 pages; never more than exist.
  EXPECT_EQ(quest_evaluation_pages({4, 1, 3, 0, 2}, 70, 16, 8), entries({1, 3, 4}));
  EXPECT_EQ(quest_evaluation_pages({1, 0}, 20, 16, 8).size(), 20u);  // 2 pages exist
}

// Drives the registered method on one sparse layer (layer 2; layers 0-1 are dense) with keys
// along e_0 of a known size per page: page 0: 0.3, page 1: 5, page 2: 0.2, page 3: 0.1, the
// current page 4 (entry 64 alone): 0.05. Query heads 0 and 1 look along `q1` and `q2`.
Selection selection_of(const json& config, int64_t budget, double q1, double q2) {
  const int64_t d = 4, L = 64;
  const double size[] = {0.3, 5.0, 0.2, 0.1};
  at::Tensor k = at::zeros({1, L, d});
  for (int64_t i = 0; i < L; ++i) k[0][i] = test::unit(0, d) * size[i / 16];
  at::Tensor v = at::randn({1, L, d});
  auto method = test::make_method("quest", config);
  method->begin(test::context(3, 2, 1, d, budget, L));
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v, 0);
  method->on_prefill(2, at::randn({2, L, d}), k, v, kv);
  at::Tensor kt = test::unit(0, d).unsqueeze(0) * 0.05, vt = at::randn({1, d});
  kv.append(kt, vt, L);
  method->on_append(2, kt, vt, kv);
  at::Tensor q = at::stack({test::unit(0, d) * q1, test::unit(0, d) * q2});  // [Hq = 2, d]
  Selection s = method->select(2, q, kv);
  EXPECT_FALSE(s.all);
  EXPECT_TRUE(method->select(0, q, kv).all);  // dense layers attend to everything
  EXPECT_GT(method->counters().at("index_bytes"), 0.0);
  return s;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Both query heads along e_0: the KV head's selection.
std::vector<int64_t> select_with(const json& config, int64_t budget) {
  return sorted(selection_of(config, budget, 1.0, 1.0).lists()[0]);
}

std::vector<int64_t> range(int64_t from, int64_t to) {  // [from, to)
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

std::vector<int64_t> operator+(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Quest, DefaultIsTheKernelPathFloorBOver16PagesWithTheCurrentOne) {
  // B = 32: 2 pages in all: the current one (entry 64) and the best other, page 1.
  EXPECT_EQ(select_with(json::object(), 32), range(16, 32) + range(64, 65));
  // B = 63: still floor(63/16) = 3 pages: + page 0.
  EXPECT_EQ(select_with(json::object(), 63), range(0, 32) + range(64, 65));
}

TEST(Quest, FillOptionAttendsExactlyB) {
  // The current page (1) + page 1 (16) + the first 15 entries of the next-ranked page 0.
  EXPECT_EQ(select_with({{"selection", "fill"}}, 32), range(0, 15) + range(16, 32) + range(64, 65));
}

TEST(Quest, EvaluationOptionRanksTheCurrentPageLikeAnyOther) {
  // max(3, 2) = 3 pages by score: 1, 0, 2; the current page (0.05) is not among them.
  EXPECT_EQ(select_with({{"selection", "evaluation"}}, 32), range(0, 48));
  // B = 64: 4 pages: + page 3; still not the current one.
  EXPECT_EQ(select_with({{"selection", "evaluation"}}, 64), range(0, 64));
}

TEST(Quest, PerQueryHeadEachQueryHeadAttendsItsOwnPages) {
  // Query head 0 along e_0 prefers page 1; head 1 along -e_0 ranks by -min: the current page
  // (-0.05), then page 3 (-0.1), page 2, page 0, page 1.
  Selection s = selection_of({{"gqa", "per_query_head"}}, 32, 1.0, -1.0);
  ASSERT_EQ(s.lists().size(), 2u);
  EXPECT_EQ(sorted(s.lists()[0]), range(16, 32) + range(64, 65));
  EXPECT_EQ(sorted(s.lists()[1]), range(48, 65));
  // The evaluation path: 3 pages each; head 1's include the current page, head 0's do not.
  s = selection_of({{"gqa", "per_query_head"}, {"selection", "evaluation"}}, 32, 1.0, -1.0);
  EXPECT_EQ(sorted(s.lists()[0]), range(0, 48));
  EXPECT_EQ(sorted(s.lists()[1]), range(32, 65));
  // Summed over the group (the default), e_0 and -e_0 cancel: every page scores 0 and the
  // ranking keeps page order.
  EXPECT_EQ(sorted(selection_of(json::object(), 32, 1.0, -1.0).lists()[0]),
            range(0, 16) + range(64, 65));
}

TEST(Quest, EvaluationPresetIsThePerQueryHeadEvaluationPath) {
  EXPECT_EQ(resolve_method("quest:evaluation", json::object(), "t", "t.config").config,
            (json{{"page_size", 16}, {"gqa", "per_query_head"}, {"selection", "evaluation"}}));
  EXPECT_EQ(method_registry().get("quest", "t").normalise_config(json::object(), "t"),
            (json{{"page_size", 16}, {"gqa", "per_kv_head"}, {"selection", "kernel"}}));
}

TEST(Quest, IncrementalSummariesMatchARebuild) {
  const int64_t d = 4, L = 20;
  at::manual_seed(7);
  at::Tensor all = at::randn({1, L + 30, d});
  at::Tensor k = all.narrow(1, 0, L), v = at::randn({1, L + 30, d});
  auto method = test::make_method("quest");
  method->begin(test::context(3, 1, 1, d, 32, L));
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v.narrow(1, 0, L), 0);
  method->on_prefill(2, at::randn({1, L, d}), k, v.narrow(1, 0, L), kv);
  for (int64_t t = L; t < L + 30; ++t) {
    at::Tensor kt = all[0][t].unsqueeze(0), vt = v[0][t].unsqueeze(0);
    kv.append(kt, vt, t);
    method->on_append(2, kt, vt, kv);
  }
  // With B = 32 and 50 entries (current page: 2 entries), the other page is the best one by the
  // rebuilt summaries' scores.
  at::Tensor q = at::randn({1, d});
  auto [kmin, kmax] = quest_page_summaries(all, 16);
  std::vector<int64_t> ranking = quest_rank_pages(quest_page_scores(q.unsqueeze(0), kmin, kmax, false)[0][0]);
  std::vector<int64_t> expected = quest_select_pages(ranking, L + 30, 16, 32, false);
  std::vector<int64_t> sel = method->select(2, q, kv).lists()[0];
  std::sort(sel.begin(), sel.end());
  EXPECT_EQ(sel, expected);
}

// A decode key's fold is left to the next selection's scoring (select_rows), or done at the
// next on_append where no selection came: at every selection, the pages ranked by summaries
// rebuilt from all the keys so far. Selections at every step, and at every third (two folds
// left pending in a row).
TEST(Quest, DeferredFoldsGiveTheRebuiltSummariesSelections) {
  const int64_t d = 8, H = 2, L = 80, steps = 60, B = 64;  // every step sparse
  for (const int64_t every : {1, 3}) {
    at::manual_seed(11);
    const at::Tensor all = at::randn({H, L + steps, d});
    auto method = test::make_method("quest");
    method->begin(test::context(3, H, H, d, B, L));
    LayerKV kv(int(H), d, at::kFloat);
    kv.append_many(all.narrow(1, 0, L), all.narrow(1, 0, L), 0);
    method->on_prefill(2, at::randn({H, L, d}), all.narrow(1, 0, L), all.narrow(1, 0, L), kv);
    for (int64_t t = L; t < L + steps; ++t) {
      const at::Tensor kt = all.select(1, t);  // [H, d]
      kv.append(kt, kt, t);
      method->on_append(2, kt, kt, kv);
      if ((t - L) % every != 0) continue;
      const at::Tensor q = at::randn({H, d});
      const std::vector<std::vector<int64_t>> got = method->select(2, q, kv).lists();
      auto [kmin, kmax] = quest_page_summaries(all.narrow(1, 0, t + 1), 16);
      const at::Tensor scores = quest_page_scores(q.view({H, 1, d}), kmin, kmax, true);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<int64_t> sel = got[size_t(h)];
        std::sort(sel.begin(), sel.end());
        EXPECT_EQ(sel, quest_select_pages(quest_rank_pages(scores[h][0]), t + 1, 16, B, false))
            << "every " << every << ", step " << t << ", head " << h;
      }
    }
  }
}

TEST(Quest, DeviceSelectionEqualsTheHostRankingOfEveryHead) {
  // Quest's kernel and fill selections are built with tensor ops (select_rows), per KV head or
  // per query head; the host path (quest_rank_pages + quest_select_pages) is the reference.
  // Random keys, several heads, many lengths and budgets, ties included (page scores rounded to
  // make them frequent).
  const int64_t d = 8, H = 3, g = 2;
  for (const char* gqa : {"per_kv_head", "per_query_head"})
    for (const char* mode : {"kernel", "fill"})
      for (int64_t budget : {16, 40, 64})
        for (uint64_t seed : {1, 2, 3}) {
          const bool per_query = std::string(gqa) == "per_query_head";
          at::manual_seed(seed);
          const int64_t L = 70 + int64_t(seed) * 13;
          at::Tensor k = (at::randn({H, L, d}) * 2).round();  // integer keys: tied page scores
          auto method = test::make_method("quest", {{"selection", mode}, {"gqa", gqa}});
          method->begin(test::context(3, H * g, H, d, budget, L));
          LayerKV kv(int(H), d, at::kFloat);
          kv.append_many(k, k, 0);
          method->on_prefill(2, at::randn({H * g, L, d}), k, k, kv);
          at::Tensor q = at::randn({H * g, d}).round();
          const Selection selection = method->select(2, q, kv);
          EXPECT_EQ(selection.per_query_head, per_query);
          const std::vector<std::vector<int64_t>> got = selection.lists();
          auto [kmin, kmax] = quest_page_summaries(k, 16);
          // [H, 1, P] summed over the group, or [H, g, P] per query head
          at::Tensor scores = quest_page_scores(q.view({H, g, d}), kmin, kmax, !per_query);
          ASSERT_EQ(int64_t(got.size()), H * scores.size(1));
          for (int64_t h = 0; h < H; ++h)
            for (int64_t j = 0; j < scores.size(1); ++j) {
              std::vector<int64_t> expected = quest_select_pages(
                  quest_rank_pages(scores[h][j]), L, 16, budget, std::string(mode) == "fill");
              std::vector<int64_t> sel = got[size_t(h * scores.size(1) + j)];
              std::sort(sel.begin(), sel.end());
              EXPECT_EQ(sel, expected) << gqa << " " << mode << " B=" << budget << " seed "
                                       << seed << " unit " << h * scores.size(1) + j;
            }
        }
}

// What a deployment fetches per step: each KV head's entries once, so per query head the union
// of its group's lists (counted on the device), per KV head its list.
TEST(Quest, FetchedBytesCountAKvHeadsEntriesOncePerGroup) {
  const int64_t d = 8, H = 2, g = 4, L = 200, budget = 48;
  for (const char* gqa : {"per_kv_head", "per_query_head"}) {
    at::manual_seed(5);
    at::Tensor k = at::randn({H, L, d});
    auto method = test::make_method("quest", {{"gqa", gqa}});
    method->begin(test::context(3, H * g, H, d, budget, L));
    LayerKV kv(int(H), d, at::kFloat);
    kv.append_many(k, k, 0);
    method->on_prefill(2, at::randn({H * g, L, d}), k, k, kv);
    at::Tensor q = at::randn({H * g, d});
    method->select(0, q, kv);  // a dense layer: counts the step
    const std::vector<std::vector<int64_t>> lists = method->select(2, q, kv).lists();
    const int64_t per_head = int64_t(lists.size()) / H;
    int64_t entries = 0;
    for (int64_t h = 0; h < H; ++h) {
      std::set<int64_t> fetched;
      for (int64_t j = 0; j < per_head; ++j)
        fetched.insert(lists[size_t(h * per_head + j)].begin(), lists[size_t(h * per_head + j)].end());
      entries += int64_t(fetched.size());
    }
    if (std::string(gqa) == "per_query_head") {
      EXPECT_GT(entries, H * 48) << "the group's lists differ";
    }
    EXPECT_EQ(method->counters()["fetched_bytes_per_step"], double(entries * 2 * d * 4)) << gqa;
  }
}

TEST(Quest, BadConfigsFailAtValidationNamingTheField) {
  std::string e = test::suite_error({{"name", "quest"}, {"config", {{"page_size", 0}}}}, {32});
  EXPECT_NE(e.find("page_size"), std::string::npos) << e;
  e = test::suite_error({{"name", "quest"}, {"config", {{"page_size", 64}}}}, {32});
  EXPECT_NE(e.find("page_size"), std::string::npos) << e;
  e = test::suite_error({{"name", "quest"}, {"config", {{"per_query_head", 3}}}}, {32});
  EXPECT_NE(e.find("per_query_head"), std::string::npos) << e;
  e = test::suite_error({{"name", "quest"}, {"config", {{"pages", 4}}}}, {32});
  EXPECT_NE(e.find("pages"), std::string::npos) << e;
  e = test::suite_error("quest", {8});
  EXPECT_NE(e.find("budget"), std::string::npos) << e;
  e = test::suite_error({{"name", "quest"}, {"config", {{"selection", "exact"}}}}, {32});
  EXPECT_NE(e.find("selection"), std::string::npos) << e;
  // The evaluation path takes max(3, B/16) pages: any budget.
  EXPECT_EQ(test::suite_error({{"name", "quest"}, {"config", {{"selection", "evaluation"}}}}, {8}),
            "");
}

}  // namespace
}  // namespace kvb
