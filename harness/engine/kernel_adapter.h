// The one adapter between LibTorch tensors and the framework-free kernels in kernels/:
// checks dtypes/shapes/contiguity and passes raw pointers.
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace kvb {

// True when the kernels can run on these tensors (fp32, CPU, contiguous).
bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                const at::Tensor& v_pool);

// Sparse GQA decode attention (kernels::sparse_decode_attention) over the pools of a LayerKV.
//   q: [Hq, d] fp32; k_pool, v_pool: [rows, d] fp32 contiguous;
//   indptr: [units + 1] int64, rows: [nnz] int64 physical pool rows: unit u attends rows
//   indptr[u] .. indptr[u + 1]; a unit is a KV head serving Hq / units query heads (units = Hq:
//   one query head each).
// Returns out [Hq, d]. When `probs` is non-null it receives per unit [Hq / units, n_u] softmax
// probabilities (views of one buffer).
at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale,
                                   std::vector<at::Tensor>* probs);

// Quest page scores (kernels::quest_page_scores) on page summaries kept in a preallocated
// buffer. Supported when kmin and kmax are fp32 CPU [H, P, d] views with unit channel stride,
// pages d floats apart and the same head stride (e.g. a narrow of a contiguous [H, cap, d]).
bool quest_page_scores_supported(const at::Tensor& kmin, const at::Tensor& kmax);
//   q: [H, g, d] any floating dtype (converted to fp32). Returns [H, g, P] fp32, or [H, 1, P]
//   summed over the group when sum_group.
at::Tensor quest_page_scores_kernel(const at::Tensor& q, const at::Tensor& kmin,
                                    const at::Tensor& kmax, bool sum_group);

// PQ table scores (kernels::pq_scores). Supported when centroids are fp32 CPU [H, m, K, s] with
// K <= 256 (codes fit uint8).
bool pq_scores_supported(const at::Tensor& centroids);
//   q: [H, g, m*s] any floating dtype; centroids: [H, m, K, s] fp32;
//   codes: [H, m, n] any integer dtype (converted to contiguous uint8). Returns [H, g, n] fp32.
at::Tensor pq_scores_kernel(const at::Tensor& q, const at::Tensor& centroids,
                            const at::Tensor& codes);

}  // namespace kvb
