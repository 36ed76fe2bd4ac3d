// PQCache (https://arxiv.org/abs/2407.12820) scoring: the query's sub-vectors against each
// sub-space's centroids give a table [m, K]; score(token) = sum_i table[i, code_i(token)].
// Batched over KV heads, fp32 tables, uint8 codes (K <= 256).
#pragma once
#include <cstdint>

namespace kvb::kernels {

//   q:         [H, g, m * s]     (g query heads per KV head; sub-space i is q[.., i*s:(i+1)*s])
//   centroids: [H, m, K, s]
//   codes:     [H, m, n]         code of token j in sub-space i at codes[h, i, j]
//   scores:    [H, g, n]
void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n);

}  // namespace kvb::kernels
