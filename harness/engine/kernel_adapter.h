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
//   rows_per_head: Hkv int64 tensors of physical pool rows.
// Returns out [Hkv, g, d]. When `probs` is non-null it receives Hkv tensors [g, n_h] of softmax
// probabilities (views of one buffer).
at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool,
                                   const std::vector<at::Tensor>& rows_per_head, double scale,
                                   std::vector<at::Tensor>* probs);

}  // namespace kvb
