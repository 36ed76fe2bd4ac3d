#include "kernels/pq_scoring.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/top_k.h"

namespace kvb::kernels {
namespace {

// Lookup tables [H, g, m, K]: table[h, i, u, c] = q[h, i, sub-space u] . centroids[h, u, c].
std::vector<float> pq_tables(const float* q, const float* centroids, int64_t H, int64_t g,
                             int64_t m, int64_t K, int64_t s) {
  std::vector<float> table(size_t(H * g * m * K));
#pragma omp parallel for schedule(static) if (H * g * m * K * s >= (1 << 16))
  for (int64_t hgi = 0; hgi < H * g * m; ++hgi) {
    const int64_t h = hgi / (g * m), i = hgi % m, gi = (hgi / m) % g;
    const float* qs = q + (h * g + gi) * m * s + i * s;
    const float* cs = centroids + (h * m + i) * K * s;
    float* t = table.data() + hgi * K;
    for (int64_t c = 0; c < K; ++c) {
      float acc = 0.f;
      for (int64_t x = 0; x < s; ++x) acc += qs[x] * cs[c * s + x];
      t[c] = acc;
    }
  }
  return table;
}

// Query head gi's scores of every code combination [K^m] (a combination's codes are its base-K
// digits, sub-space 0 the most significant), times scale; each sums its sub-spaces in order, as
// pq_scores sums them. table: the head's [g, m, K].
std::vector<float> combination_scores(const float* table, int64_t gi, int64_t m, int64_t K,
                                      float scale) {
  std::vector<float> partial(1, 0.f);  // [K^u]: the sums of sub-spaces 0 .. u-1
  for (int64_t u = 0; u < m; ++u) {
    const float* t = table + (gi * m + u) * K;
    std::vector<float> next(partial.size() * size_t(K));
    for (size_t p = 0; p < partial.size(); ++p)
      for (int64_t c = 0; c < K; ++c) next[p * size_t(K) + size_t(c)] = partial[p] + t[c];
    partial.swap(next);
  }
  for (float& x : partial) x *= scale;
  return partial;
}

// One head's selection (pq_top_k). table: the head's [g, m, K]; codes: its m rows.
void top_k_by_combination(const float* table, const uint8_t* codes, int64_t g, int64_t m,
                          int64_t K, int64_t n, int64_t codes_row, float scale, int64_t k,
                          int64_t lead, int64_t trailing, int64_t* o) {
  std::iota(o, o + lead, int64_t(0));
  std::iota(o + lead + k, o + lead + k + trailing, lead + n);
  if (k == 0) return;
  // Each token's combination [n], and how many tokens hold each one [P].
  std::vector<int32_t> combination(size_t(n), 0);
  for (int64_t u = 0; u < m; ++u) {
    const uint8_t* row = codes + u * codes_row;
    for (int64_t j = 0; j < n; ++j)
      combination[size_t(j)] = combination[size_t(j)] * int32_t(K) + row[j];
  }
  const int64_t P = pq_combinations(m, K);
  std::vector<int64_t> count(size_t(P), 0);
  for (int32_t c : combination) ++count[size_t(c)];
  std::vector<int32_t> present;  // combinations held by a token
  for (int64_t p = 0; p < P; ++p)
    if (count[size_t(p)] > 0) present.push_back(int32_t(p));
  // weight[p] = sum over the query heads of exp(score - max) / sum: the softmax over every
  // token, where the tokens of one combination share a term.
  std::vector<float> weight(size_t(P), 0.f), e(present.size());
  for (int64_t gi = 0; gi < g; ++gi) {
    const std::vector<float> score = combination_scores(table, gi, m, K, scale);  // [P]
    float top = -INFINITY;
    for (int32_t p : present) {
      const float x = score[size_t(p)];
      top = std::isnan(top) || x <= top ? top : x;  // a NaN stays, as in ATen's max
    }
    // In double: a serial fp32 sum of 4096 terms drifts by about 1e-6, enough to swap tokens
    // whose weights ATen's softmax (a vectorised sum) tells apart.
    double sum = 0.0;
    for (size_t i = 0; i < present.size(); ++i) {
      e[i] = std::exp(score[size_t(present[i])] - top);
      sum += double(count[size_t(present[i])]) * double(e[i]);
    }
    for (size_t i = 0; i < present.size(); ++i) weight[size_t(present[i])] += e[i] / float(sum);
  }
  // The k-th largest token weight's key: the combinations by key, largest first, their tokens
  // counted until k are reached (within the first min(k, present) combinations, each holding a
  // token at least, so only those are sorted). Tokens above it are all taken; of those at it,
  // the first `ties` by index.
  std::vector<uint32_t> key(count.size());
  std::vector<std::pair<uint32_t, int64_t>> ranked;  // (key, tokens)
  for (int32_t p : present) {
    key[size_t(p)] = rank_key(weight[size_t(p)]);
    ranked.emplace_back(key[size_t(p)], count[size_t(p)]);
  }
  const auto first = ranked.begin(), last = first + std::min<int64_t>(k, int64_t(ranked.size()));
  std::nth_element(first, last - 1, ranked.end(), std::greater<>());
  std::sort(first, last, std::greater<>());
  int64_t reached = 0;
  auto at = first;
  while (reached + at->second < k) reached += (at++)->second;
  const uint32_t threshold = at->first;
  int64_t above = 0;
  for (const auto& [x, tokens] : ranked) above += x > threshold ? tokens : 0;
  int64_t ties = k - above, out = lead;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t x = key[size_t(combination[size_t(j)])];
    if (x > threshold || (x == threshold && ties-- > 0)) o[out++] = lead + j;
  }
}

}  // namespace

void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n,
               int64_t codes_row) {
  const std::vector<float> table = pq_tables(q, centroids, H, g, m, K, s);  // small (K <= 256)
  // Scores: tokens in chunks; per sub-space one streaming pass over its codes.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (H * g * m * n >= (1 << 16))
  for (int64_t it = 0; it < H * chunks; ++it) {
    const int64_t h = it / chunks, j0 = (it % chunks) * kChunk, j1 = std::min(n, j0 + kChunk);
    for (int64_t gi = 0; gi < g; ++gi) {
      float* out = scores + (h * g + gi) * n;
      std::fill(out + j0, out + j1, 0.f);
      for (int64_t i = 0; i < m; ++i) {
        const float* t = table.data() + ((h * g + gi) * m + i) * K;
        const uint8_t* cd = codes + (h * m + i) * codes_row;
        for (int64_t j = j0; j < j1; ++j) out[j] += t[cd[j]];
      }
    }
  }
}

void pq_top_k(const float* q, const float* centroids, const uint8_t* codes, int64_t H, int64_t g,
              int64_t m, int64_t K, int64_t s, int64_t n, int64_t codes_row, float scale,
              int64_t k, int64_t lead, int64_t trailing, int64_t* out) {
  const std::vector<float> table = pq_tables(q, centroids, H, g, m, K, s);
  const int64_t width = lead + k + trailing;
#pragma omp parallel for schedule(dynamic, 1) if (H > 1 && H * n >= (1 << 14))
  for (int64_t h = 0; h < H; ++h)
    top_k_by_combination(table.data() + h * g * m * K, codes + h * m * codes_row, g, m, K, n,
                         codes_row, scale, k, lead, trailing, out + h * width);
}

}  // namespace kvb::kernels
