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

// PQCache's ranking of a decode step by code combination: out[h] = 0 .. lead - 1, then lead +
// the indices of the k tokens of largest weight, ascending, then lead + n .. lead + n +
// trailing - 1, where a token's weight is sum over its head's g query heads of
// softmax_j(scale * score[h, i, j]) (scores as pq_scores computes them): PQCache's softmax over
// the candidates summed over the GQA group. Ties at the k-th weight go to the lower index; NaN
// ranks above every number (kernels/top_k.h). out: [H, lead + k + trailing] int64.
// A token's scores depend only on its m codes, one of K^m combinations: the softmax's maximum
// and sum, and every weight, are computed once per combination present (counted), not per
// token, so a step reads each code twice (the counts, then the selection) and writes no score.
// The weights equal those of softmax(pq_scores) up to rounding (another summation order), so
// the two can rank differently only where two combinations' weights are within a rounding.
// Needs K^m <= kPqMaxCombinations, 0 <= k <= n and codes < K (not checked: they index the
// counts, as they index the tables in pq_scores).
constexpr int64_t kPqMaxCombinations = 4096;
void pq_top_k(const float* q, const float* centroids, const uint8_t* codes, int64_t H, int64_t g,
              int64_t m, int64_t K, int64_t s, int64_t n, int64_t codes_row, float scale,
              int64_t k, int64_t lead, int64_t trailing, int64_t* out);

// K^m, or kPqMaxCombinations + 1 where it exceeds that (no overflow).
inline int64_t pq_combinations(int64_t m, int64_t K) {
  int64_t P = 1;
  for (int64_t i = 0; i < m && P <= kPqMaxCombinations; ++i) P *= K;
  return P <= kPqMaxCombinations ? P : kPqMaxCombinations + 1;
}

// Whether codes [H, m, n] with these element strides are laid out as pq_scores (and the CUDA
// kernel of the same name) read them, codes_row = stride1: unit column stride, rows evenly
// stride1 >= n apart (e.g. the leading n columns of a wider [H, m, N] index).
inline bool pq_codes_rows_in_place(int64_t m, int64_t n, int64_t stride0, int64_t stride1,
                                   int64_t stride2) {
  return stride2 == 1 && stride1 >= n && stride0 == m * stride1;
}

}  // namespace kvb::kernels
