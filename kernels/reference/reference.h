// Plain reference implementations of the kernels in kernels/ (same signatures, suffix
// _reference): straightforward loops, double accumulation, two-pass softmax, no threads.
// The tests compare every kernel with these on random inputs; the CUDA kernels share them.
#pragma once
#include <cstdint>

namespace kvb::kernels {

void dense_decode_attention_reference(const float* q, const float* k, const float* v, float* out,
                                      int64_t num_q_heads, int64_t num_kv_heads, int64_t n,
                                      int64_t d, int64_t kv_head_stride, float scale);
void sparse_decode_attention_reference(const float* q, const float* k_pool, const float* v_pool,
                                       const int64_t* offsets, const int64_t* rows, float* out,
                                       int64_t num_q_heads, int64_t num_kv_heads, int64_t d,
                                       float scale, float* probs = nullptr);
void quest_page_scores_reference(const float* q, const float* kmin, const float* kmax,
                                 float* scores, int64_t H, int64_t g, int64_t P, int64_t d,
                                 int64_t head_stride, bool sum_group);
void cosine_assign_reference(const float* keys, const float* centroids, int32_t* labels,
                             int64_t H, int64_t n, int64_t C, int64_t d);
// Cosine similarity of keys[h, j] and centroids[h, c] (for tests tolerant to near ties).
double cosine_reference(const float* keys, const float* centroids, int64_t h, int64_t j,
                        int64_t c, int64_t n, int64_t C, int64_t d);
void centroid_update_reference(const float* keys, const int32_t* labels, const float* old,
                               float* out, int64_t H, int64_t n, int64_t C, int64_t d,
                               int64_t* counts = nullptr);
// fp32 rows only (the bf16 kernel is checked against this over the widened rows).
void rms_norm_reference(const float* x, const float* weight, float* out, int64_t rows,
                        int64_t dim, float eps);
void pq_scores_reference(const float* q, const float* centroids, const uint8_t* codes,
                         float* scores, int64_t H, int64_t g, int64_t m, int64_t K, int64_t s,
                         int64_t n, int64_t codes_row);

// PQCache's selection (pq_scoring.h pq_top_k) per token, in double: scores as
// pq_scores_reference, a two-pass softmax over the n tokens per query head, summed over the
// group; the k largest by a stable descending sort (ties to the lower index). weights (when
// non-null) receives the [H, n] weights ranked.
void pq_top_k_reference(const float* q, const float* centroids, const uint8_t* codes, int64_t H,
                        int64_t g, int64_t m, int64_t K, int64_t s, int64_t n, int64_t codes_row,
                        float scale, int64_t k, int64_t lead, int64_t trailing, int64_t* out,
                        double* weights = nullptr);

}  // namespace kvb::kernels
