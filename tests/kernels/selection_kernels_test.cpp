// Quest page scoring, ClusterKV assignment / centroid update, PQ scoring, top-k vs reference.
#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/kmeans_assign.h"
#include "kernels/pq_scoring.h"
#include "kernels/quest_scoring.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::kernels {
namespace {

using test::for_each_simd_level;
using test::KernelRng;
using test::poisoned;
using test::relative_error;
using test::top_k_difference;

TEST(QuestPageScores, MatchReferencePerQueryHeadAndSummed) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 8, g = 4, P = 700, d = 128, stride = 1000 * d;
  auto q = rng.normal(size_t(H * g * d));
  auto a = rng.normal(size_t(H * stride)), b = rng.normal(size_t(H * stride));
  std::vector<float> lo(a.size()), hi(a.size());
  for (size_t i = 0; i < a.size(); ++i) lo[i] = std::min(a[i], b[i]), hi[i] = std::max(a[i], b[i]);
  for (bool sum : {false, true}) {
    const size_t size = size_t(H * (sum ? 1 : g) * P);
    auto ref = poisoned<float>(size);
    quest_page_scores_reference(q.data(), lo.data(), hi.data(), ref.data(), H, g, P, d, stride, sum);
    for_each_simd_level([&] {
      auto out = poisoned<float>(size);
      quest_page_scores(q.data(), lo.data(), hi.data(), out.data(), H, g, P, d, stride, sum);
      EXPECT_LT(relative_error(out, ref), 1e-5) << "sum_group " << sum;
    });
  }
}

TEST(CosineAssign, PicksTheMostSimilarCentroid) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 4, n = 1500, C = 40, d = 64;
  auto keys = rng.normal(size_t(H * n * d));
  auto cent = rng.normal(size_t(H * C * d), 3.f);  // norms differ from the keys': cosine matters
  auto ref = poisoned<int32_t>(size_t(H * n));
  cosine_assign_reference(keys.data(), cent.data(), ref.data(), H, n, C, d);
  for_each_simd_level([&] {
    auto labels = poisoned<int32_t>(size_t(H * n));
    cosine_assign(keys.data(), cent.data(), labels.data(), H, n, C, d);
    int64_t same = 0;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = h * n + j;
        ASSERT_GE(labels[i], 0);
        ASSERT_LT(labels[i], C);
        same += labels[i] == ref[i];
        // Near ties may flip by rounding; the chosen centroid must be as similar as the best.
        const double got = cosine_reference(keys.data(), cent.data(), h, j, labels[i], n, C, d);
        const double best = cosine_reference(keys.data(), cent.data(), h, j, ref[i], n, C, d);
        EXPECT_LE(best - got, 1e-5 * std::max(1.0, std::abs(best)));
      }
    EXPECT_GE(same, H * n - 5);
  });
}

TEST(CentroidUpdate, MeansOfRawKeysAndEmptyClustersKept) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 8, n = 2000, C = 64, d = 128;
  auto keys = rng.normal(size_t(H * n * d));
  auto old = rng.normal(size_t(H * C * d));
  std::vector<int32_t> labels(size_t(H * n));
  for (auto& l : labels) l = int32_t(rng.uniform(0, C - 4));  // the last 3 clusters stay empty
  auto out = poisoned<float>(old.size()), ref = poisoned<float>(old.size());
  std::vector<int64_t> counts(size_t(H * C), -1), ref_counts(size_t(H * C), -1);
  centroid_update(keys.data(), labels.data(), old.data(), out.data(), H, n, C, d, counts.data());
  centroid_update_reference(keys.data(), labels.data(), old.data(), ref.data(), H, n, C, d,
                            ref_counts.data());
  EXPECT_LT(relative_error(out, ref), 1e-5);
  EXPECT_EQ(counts, ref_counts);
  for (int64_t x = 0; x < d; ++x) EXPECT_EQ(out[(C - 1) * d + x], old[(C - 1) * d + x]);
  // In place (out aliases old).
  auto inplace = old;
  centroid_update(keys.data(), labels.data(), inplace.data(), inplace.data(), H, n, C, d);
  EXPECT_LT(relative_error(inplace, ref), 1e-5);
}

// Packed codes, and the leading n columns of wider rows (PQCache's index read in place).
TEST(PqScores, MatchReference) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 8, g = 4, m = 16, K = 256, s = 8, n = 3000;
  for (const int64_t row : {n, n + 77}) {
    SCOPED_TRACE("codes rows " + std::to_string(row) + " apart");
    auto q = rng.normal(size_t(H * g * m * s));
    auto cent = rng.normal(size_t(H * m * K * s));
    std::vector<uint8_t> codes(size_t(H * m * row));
    for (auto& c : codes) c = uint8_t(rng.uniform(0, K - 1));
    auto out = poisoned<float>(size_t(H * g * n)), ref = poisoned<float>(size_t(H * g * n));
    pq_scores(q.data(), cent.data(), codes.data(), out.data(), H, g, m, K, s, n, row);
    pq_scores_reference(q.data(), cent.data(), codes.data(), ref.data(), H, g, m, K, s, n, row);
    EXPECT_LT(relative_error(out, ref), 1e-5);
  }
}

// PQCache's selection by code combination against a per-token ranking in double: the same
// tokens up to near ties (weights within 1e-5 of the k-th, which another summation order may
// swap), and of tokens with equal codes (equal weights on every path) the lower indices first.
// Codes over the whole codebook and over 3 codes only (a few combinations of many tokens, so
// the k-th falls among ties); 1 to 4 sub-spaces; codes rows wider than n (the index's leading
// columns); k from 0 to every token.
TEST(PqTopK, MatchesAPerTokenRankingInDoubleAndTiesGoLow) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 3, g = 4, lead = 5, trailing = 7;
  const float scale = 0.25f;
  struct Shape { int64_t m, K, s; };
  for (const Shape shape : {Shape{2, 64, 8}, Shape{1, 256, 16}, Shape{3, 16, 4}, Shape{4, 8, 4}})
    for (const int64_t n : {int64_t(1), int64_t(700), int64_t(5000)})
      for (const int64_t alphabet : {shape.K, int64_t(3)})
        for (const int64_t k : {int64_t(0), int64_t(1), std::min<int64_t>(100, n), n}) {
          const auto [m, K, s] = shape;
          SCOPED_TRACE("m " + std::to_string(m) + ", K " + std::to_string(K) + ", n " +
                       std::to_string(n) + ", codes < " + std::to_string(alphabet) + ", k " +
                       std::to_string(k));
          const int64_t row = n + 33;
          auto q = rng.normal(size_t(H * g * m * s));
          auto cent = rng.normal(size_t(H * m * K * s));
          std::vector<uint8_t> codes(size_t(H * m * row));
          for (auto& c : codes) c = uint8_t(rng.uniform(0, alphabet - 1));
          const size_t width = size_t(lead + k + trailing);
          auto out = poisoned<int64_t>(H * width), ref = poisoned<int64_t>(H * width);
          std::vector<double> weights(size_t(H * n));
          pq_top_k(q.data(), cent.data(), codes.data(), H, g, m, K, s, n, row, scale, k, lead,
                   trailing, out.data());
          pq_top_k_reference(q.data(), cent.data(), codes.data(), H, g, m, K, s, n, row, scale, k,
                             lead, trailing, ref.data(), weights.data());
          EXPECT_EQ(top_k_difference(out, ref, weights, H, n, lead, k, trailing, 1e-5), "");
          for (int64_t h = 0; h < H; ++h) {  // equal codes: a taken token's earlier twins taken
            std::vector<bool> taken(size_t(n), false);
            for (size_t i = 0; i < size_t(k); ++i)
              taken[size_t(out[h * width + lead + i] - lead)] = true;
            std::map<std::vector<uint8_t>, bool> skipped;  // codes -> an untaken token seen
            for (int64_t j = 0; j < n; ++j) {
              std::vector<uint8_t> key;
              for (int64_t u = 0; u < m; ++u) key.push_back(codes[size_t((h * m + u) * row + j)]);
              if (taken[size_t(j)]) {
                ASSERT_FALSE(skipped[key]) << "head " << h << ", token " << j;
              } else {
                skipped[key] = true;
              }
            }
          }
        }
}

// A NaN in q makes every weight NaN (as ATen's softmax spreads it): all tie, the first k go.
TEST(PqTopK, NanWeightsAllTieToTheFirstTokens) {
  const int64_t H = 1, g = 2, m = 2, K = 4, s = 2, n = 50, k = 10;
  std::vector<float> q(size_t(H * g * m * s), 0.5f), cent(size_t(H * m * K * s), 1.f);
  q[1] = NAN;
  std::vector<uint8_t> codes(size_t(H * m * n));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i * 7 % K);
  std::vector<int64_t> out(size_t(k + 1));
  pq_top_k(q.data(), cent.data(), codes.data(), H, g, m, K, s, n, n, 1.f, k, 0, 1, out.data());
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(out[size_t(i)], i);
  EXPECT_EQ(out[size_t(k)], n);
}

}  // namespace
}  // namespace kvb::kernels
