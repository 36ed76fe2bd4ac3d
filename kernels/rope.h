// Rotary position embedding with rotate-half pairs (channel i with i + r/2, Llama's layout) in
// one call, bit for bit what ATen computes for engine/model/llama_layers' apply_rope:
// out = x * cos + swap(x) * sin over the first r channels, with swap(x) = (x[r/2:r], x[:r/2]),
// cos = (c, c) and sin = (-s, s); each product and the sum rounded to the element type; the
// channels past r copied. ATen takes 4 operators (a concatenation, two products, a sum), and a
// fifth for the copy when r < d. Framework-free.
#pragma once
#include <cstdint>

#include "kernels/kv_element.h"

namespace kvb::kernels {

// x, out: [n, L, d] (n heads of L positions; out must not overlap x); cos, sin: [L, r]; all of
// `type`, fp32 or bf16 (fp16 throws std::invalid_argument). r even, 0 < r <= d.
void rope_rotate_half(const void* x, const void* cos, const void* sin, void* out, KvElement type,
                      int64_t n, int64_t L, int64_t d, int64_t r);

}  // namespace kvb::kernels
