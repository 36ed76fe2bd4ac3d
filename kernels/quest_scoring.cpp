#include "kernels/quest_scoring.h"

#include <algorithm>

#include "kernels/simd.h"

namespace kvb::kernels {
namespace {

template <int kUnused>
KVB_INLINE void pages_body(const float* q, const float* lo, const float* hi, float* out,
                           int64_t g, int64_t p0, int64_t p1, int64_t P, int64_t d,
                           bool sum_group) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* a = lo + p * d;
    const float* b = hi + p * d;
    float total = 0.f;
    for (int64_t i = 0; i < g; ++i) {
      const float* qi = q + i * d;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < d; ++c) s += std::max(qi[c] * b[c], qi[c] * a[c]);
      if (sum_group) total += s;
      else out[i * P + p] = s;
    }
    if (sum_group) out[p] = total;
  }
}

void pages_generic(const float* q, const float* lo, const float* hi, float* out, int64_t g,
                   int64_t p0, int64_t p1, int64_t P, int64_t d, bool sum_group) {
  pages_body<0>(q, lo, hi, out, g, p0, p1, P, d, sum_group);
}
#if KVB_X86_DISPATCH
KVB_TARGET_AVX2 void pages_avx2(const float* q, const float* lo, const float* hi, float* out,
                                int64_t g, int64_t p0, int64_t p1, int64_t P, int64_t d,
                                bool sum_group) {
  pages_body<0>(q, lo, hi, out, g, p0, p1, P, d, sum_group);
}
#endif

}  // namespace

void quest_page_scores(const float* q, const float* kmin, const float* kmax, float* scores,
                       int64_t H, int64_t g, int64_t P, int64_t d, int64_t head_stride,
                       bool sum_group) {
  constexpr int64_t kChunk = 256;  // pages per work item
  const int64_t chunks = (P + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (H * P * g * d >= (1 << 16))
  for (int64_t it = 0; it < H * chunks; ++it) {
    const int64_t h = it / chunks, p0 = (it % chunks) * kChunk, p1 = std::min(P, p0 + kChunk);
    const float* qh = q + h * g * d;
    const float* lo = kmin + h * head_stride;
    const float* hi = kmax + h * head_stride;
    float* out = scores + h * (sum_group ? 1 : g) * P;
#if KVB_X86_DISPATCH
    if (cpu_has_avx2_fma()) {
      pages_avx2(qh, lo, hi, out, g, p0, p1, P, d, sum_group);
      continue;
    }
#endif
    pages_generic(qh, lo, hi, out, g, p0, p1, P, d, sum_group);
  }
}

}  // namespace kvb::kernels
