#include "methods/retrieval/quest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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

TEST(Quest, PageScoresEqualBruteForceAndBoundEveryKey) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    at::manual_seed(seed);
    const int64_t H = 2, g = 2, n = 53, d = 8, page = 16;  // 4 pages, the last with 5 entries
    at::Tensor k = at::randn({H, n, d});
    at::Tensor q = at::randn({H, g, d});
    auto [kmin, kmax] = quest_page_summaries(k, page);
    ASSERT_EQ(kmin.size(1), 4);
    at::Tensor scores = quest_page_scores(q, kmin, kmax);  // [H, g, P]
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
  std::vector<int64_t> sel = quest_select_pages({ranking}, 70, 16, 32, /*fill_budget=*/true);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 10; ++i) expected.push_back(i);
  for (int64_t i = 32; i < 48; ++i) expected.push_back(i);
  for (int64_t i = 64; i < 70; ++i) expected.push_back(i);
  EXPECT_EQ(sel, expected);
  // The reference kernel: floor(32/16) = 2 pages in all, the current one among them.
  sel = quest_select_pages({ranking}, 70, 16, 32, /*fill_budget=*/false);
  expected.assign({});
  for (int64_t i = 32; i < 48; ++i) expected.push_back(i);
  for (int64_t i = 64; i < 70; ++i) expected.push_back(i);
  EXPECT_EQ(sel, expected);
  // B = 16 with a current page of 16 entries: only the current page.
  sel = quest_select_pages({{0, 1, 2}}, 64, 16, 16, true);
  EXPECT_EQ(sel.size(), 16u);
  EXPECT_EQ(sel.front(), 48);
  // Per query head rankings are merged rank by rank: head 0's best, head 1's best, ...
  sel = quest_select_pages({{1, 0, 2, 3}, {3, 1, 0, 2}}, 70, 16, 38, true);  // 6 + 16 + 16
  std::set<int64_t> pages;
  for (int64_t i : sel) pages.insert(i / 16);
  EXPECT_EQ(pages, (std::set<int64_t>{1, 3, 4}));
}

// Drives the registered method on one sparse layer (layer 2; layers 0-1 are dense).
TEST(Quest, MethodSelectsTheBestPagesAndTheCurrentOneExactlyB) {
  const int64_t d = 4, L = 64;
  at::Tensor k = at::randn({1, L, d}) * 0.01;
  // Page 1 (entries 16..31) holds keys aligned with e_0; the query looks along e_0.
  for (int64_t i = 16; i < 32; ++i) k[0][i] = test::unit(0, d) * 5.0;
  at::Tensor v = at::randn({1, L, d});
  auto method = test::make_method("quest");
  method->begin(test::context(3, 2, 1, d, 32, L));
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v, 0);
  method->on_prefill(2, at::randn({2, L, d}), k, v, kv);
  at::Tensor kt = at::randn({1, d}) * 0.01, vt = at::randn({1, d});
  kv.append(kt, vt, L);
  method->on_append(2, kt, vt, kv);
  at::Tensor q = at::stack({test::unit(0, d), test::unit(0, d)});  // [Hq = 2, d]
  Selection s = method->select(2, q, kv);
  ASSERT_FALSE(s.all);
  std::vector<int64_t> sel = s.per_head[0];
  std::sort(sel.begin(), sel.end());
  EXPECT_EQ(sel.size(), 32u);  // B exactly
  EXPECT_EQ(sel.back(), L);    // the current (new) page
  for (int64_t i = 16; i < 32; ++i)
    EXPECT_TRUE(std::binary_search(sel.begin(), sel.end(), i)) << i;
  // Dense layers attend to everything.
  EXPECT_TRUE(method->select(0, q, kv).all);
  EXPECT_GT(method->counters().at("index_bytes"), 0.0);
}

TEST(Quest, IncrementalSummariesMatchARebuild) {
  const int64_t d = 4, L = 20;
  at::manual_seed(7);
  at::Tensor all = at::randn({1, L + 30, d});
  at::Tensor k = all.narrow(1, 0, L), v = at::randn({1, L + 30, d});
  auto method = test::make_method("quest");
  method->begin(test::context(3, 1, 1, d, 16, L));
  LayerKV kv(1, d, at::kFloat);
  kv.append_many(k, v.narrow(1, 0, L), 0);
  method->on_prefill(2, at::randn({1, L, d}), k, v.narrow(1, 0, L), kv);
  for (int64_t t = L; t < L + 30; ++t) {
    at::Tensor kt = all[0][t].unsqueeze(0), vt = v[0][t].unsqueeze(0);
    kv.append(kt, vt, t);
    method->on_append(2, kt, vt, kv);
  }
  // With B = 16 and 50 entries (current page: 2 entries), the 14 other entries come from the
  // best page by the rebuilt summaries' scores.
  at::Tensor q = at::randn({1, d});
  auto [kmin, kmax] = quest_page_summaries(all, 16);
  std::vector<int64_t> ranking = quest_rank_pages(quest_page_scores(q.unsqueeze(0), kmin, kmax)[0][0]);
  std::vector<int64_t> expected = quest_select_pages({ranking}, L + 30, 16, 16, true);
  std::vector<int64_t> sel = method->select(2, q, kv).per_head[0];
  std::sort(sel.begin(), sel.end());
  EXPECT_EQ(sel, expected);
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
}

}  // namespace
}  // namespace kvb
