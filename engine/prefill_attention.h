// The prefill's causal attention over a prompt from position 0: explicit, in query chunks
// (every device and LibTorch version), or ATen's fused scaled_dot_product_attention (a GPU,
// bf16 or f16, LibTorch 2.x). Session::prefill_layer picks one; benchmarks/gpu_bench.cpp times
// the fused one under each of ATen's kernels (gpu_prefill_attention).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace kvb {

// Attention scores and softmax: fp32 at least (bf16/f16 widened, f64 kept).
at::ScalarType attention_score_type(const at::Tensor& t);

// q: [Hq, L, d], k, v: [Hkv, L, d] (query head h reads KV head h / g) -> [Hq, L, d]; query i
// sees keys 0..i, scale 1/sqrt(d). In query chunks whose scores [Hkv, g*chunk, keys] (fp32 at
// least) stay within `score_bytes`: masked, softmax, times V.
at::Tensor chunked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    int64_t score_bytes);

// The kernel ATen would pick for fused_causal_attention's call on q's shape, by SDPBackend's
// number (ATen/SDPBackend.h, LibTorch 2.x): 1 flash, 2 memory-efficient, 3 cuDNN, 4
// overrideable, or 0 its math kernel, which would hold [Hq, L, L] scores; -1 where the call is
// not for ATen's fused attention (the CPU, f32 or f64, LibTorch 1.13) or no kernel is enabled.
// The prefill attention is the fused one where this is > 0.
int fused_prefill_attention_kernel(const at::Tensor& q);

// The same attention as chunked_causal_attention through scaled_dot_product_attention
// (LibTorch 2.x; throws std::logic_error on 1.13).
at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace kvb
