// Decode-time attention (one new query token per sequence), framework-free: fp32 queries and
// accumulation; K/V in fp32, bf16 or fp16 (sparse), widened to fp32 as they are read.
// Both kernels stream K and V once (online softmax in tiles, flash-decoding style: partial
// (max, sum, accumulator) per (KV head, row chunk), merged at the end), serve the g = Hq/Hkv
// query heads of a GQA group from one read of each K/V row, and run OpenMP over
// (KV head, row chunk) work items. Reference implementations: kernels/reference/reference.h.
#pragma once
#include <cstdint>

#include "kernels/kv_element.h"

namespace kvb::kernels {


// Dense GQA decode attention over contiguous K/V.
//   q:   [Hq, d]           query heads h*g .. h*g+g-1 share KV head h (g = Hq / Hkv)
//   k,v: [Hkv, n, d]       rows d floats apart, heads kv_head_stride floats apart
//                          (kv_head_stride >= n*d; pass n*d when packed)
//   out: [Hq, d]
// scale: usually 1/sqrt(d). n == 0 gives zeros.
void dense_decode_attention(const float* q, const float* k, const float* v, float* out,
                            int64_t num_q_heads, int64_t num_kv_heads, int64_t n, int64_t d,
                            int64_t kv_head_stride, float scale);

// Sparse GQA decode attention over per-KV-head row lists into paged pools; no gathered copy.
//   q:       [Hq, d]
//   k_pool, v_pool: [rows, d] (any number of rows; rows d floats apart)
//   offsets: [Hkv + 1]: KV head h attends n_h = offsets[h+1] - offsets[h] pool rows (ragged:
//            heads may differ in length), listed in `rows`:
//   rows:    row_list_stride 0: [offsets[Hkv]], head h's at rows[offsets[h] ..) (packed);
//            row_list_stride > 0: head h's at rows[h * row_list_stride ..) (each head's list
//            a row of a wider table, such as a block table's [Hkv, W] rows, read in place)
//   out:     [Hq, d]
//   probs:   optional (nullptr: not written). When given, [g * offsets[Hkv]] floats: head h's
//            softmax probabilities [g, n_h] start at g * offsets[h] (row i, entry j at
//            g * offsets[h] + i * n_h + j).
void sparse_decode_attention(const float* q, const float* k_pool, const float* v_pool,
                             const int64_t* offsets, const int64_t* rows, float* out,
                             int64_t num_q_heads, int64_t num_kv_heads, int64_t d, float scale,
                             float* probs = nullptr, int64_t row_list_stride = 0);

// The same over pools of any KvElement (16-bit pools are read at half the bytes).
void sparse_decode_attention(const float* q, const void* k_pool, const void* v_pool,
                             KvElement element, const int64_t* offsets, const int64_t* rows,
                             float* out, int64_t num_q_heads, int64_t num_kv_heads, int64_t d,
                             float scale, float* probs = nullptr, int64_t row_list_stride = 0);

// How many chunks of rows the kernels split each of `units` (KV head, group pass) work units
// into on `threads` threads, the longest unit holding `max_rows`: about 4 work items per thread
// (split-K), chunks of at least 512 rows. (A call streaming under 2 MiB runs serially, in one.)
int64_t decode_attention_chunks(int threads, int64_t units, int64_t max_rows);

// Bytes a call must move (for bandwidth accounting): the attended K and V rows, q, out, and the
// row indices when `indexed` (sparse).
int64_t decode_attention_bytes(int64_t num_q_heads, int64_t attended_rows_all_heads, int64_t d,
                               bool indexed);

}  // namespace kvb::kernels
