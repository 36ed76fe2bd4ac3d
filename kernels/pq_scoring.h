// PQCache (https://arxiv.org/abs/2407.12820) scoring: the query's sub-vectors against each
// sub-space's centroids give a table [m, K]; score(token) = sum_i table[i, code_i(token)].
// Batched over KV heads, fp32 tables, uint8 codes (K <= 256).
#pragma once
#include <cstdint>

namespace kvb::kernels {

//   q:         [H, g, m * s]     (g query heads per KV head; sub-space i is q[.., i*s:(i+1)*s])
//   centroids: [H, m, K, s]
//   codes:     [H, m, n]         code of token j in sub-space i at codes[(h * m + i) * row + j]:
//                                rows `codes_row` >= n apart (n when packed; more for the
//                                leading n columns of a wider index, read in place)
//   scores:    [H, g, n]
void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n,
               int64_t codes_row);

// Whether codes [H, m, n] with these element strides are laid out as pq_scores (and the CUDA
// kernel of the same name) read them, codes_row = stride1: unit column stride, rows evenly
// stride1 >= n apart (e.g. the leading n columns of a wider [H, m, N] index).
inline bool pq_codes_rows_in_place(int64_t m, int64_t n, int64_t stride0, int64_t stride1,
                                   int64_t stride2) {
  return stride2 == 1 && stride1 >= n && stride0 == m * stride1;
}

}  // namespace kvb::kernels
