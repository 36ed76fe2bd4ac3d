// The reference row of a GPU latency cell (issue 21): the cell's decode attention shapes run
// through ATen's scaled_dot_product_attention in the same process, so that kvbench's attention
// time has PyTorch's beside it, measured on the same GPU in the same hour.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace kvb {

// Whether this LibTorch's scaled_dot_product_attention takes GQA unrepeated (enable_gqa,
// LibTorch >= 2.5); Debian's 1.13 has no scaled_dot_product_attention at all.
bool sdpa_reference_available();

// Seconds one decode query's dense attention takes through ATen's scaled_dot_product_attention:
// q [1, q_heads, 1, head_dim], K and V [1, kv_heads, context, head_dim] of random values in
// `dtype` on `device`, the group's query heads sharing their K/V row (enable_gqa: K/V read
// once). The median of `calls` calls after an untimed one (which loads the kernels), timed by
// the phase clock: CUDA events on a GPU, the host's clock on the CPU. Nullopt where
// !sdpa_reference_available().
std::optional<double> sdpa_decode_seconds(at::Device device, at::ScalarType dtype,
                                          int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          int64_t context, int calls = 11);

}  // namespace kvb
