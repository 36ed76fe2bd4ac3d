#include "kernels/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/kv_prefetch.h"
#include "kernels/simd.h"

#if KVB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kvb::kernels {
namespace {

// Rows scored before one rescale of the accumulators. 16, not 32: a tile's V rows (8 KB in
// fp32 at d = 128) and the rows prefetched into L1 ahead (16 rows then: 16 KB of K and V) fit
// in a 32 KB L1 together; at 32 the prefetched lines evicted the tile's V rows before the PV pass
// read them (dense 32k on a 2-core EPYC VM, 4 paired rounds: 76-84% of read_sum against
// 75-78% at 32).
constexpr int64_t kTile = 16;
constexpr int64_t kMaxGroup = 16;    // g handled per pass (larger groups loop over passes)
constexpr int64_t kMinChunkRows = 512;
constexpr int64_t kParallelBytes = int64_t(2) << 20;   // K+V bytes below which one thread runs

// K/V element loads: fp32 as is; bf16 (the top half of an fp32) and fp16 widened to fp32.
KVB_INLINE float load(const float* p, int64_t i) { return p[i]; }
KVB_INLINE float load(const bf16* p, int64_t i) { return bf16_to_float(p[i]); }
KVB_INLINE float load(const f16* p, int64_t i) { return f16_to_float(p[i]); }

// Partial result of one (KV head, row chunk): running max m, sum l (the accumulator acc[g, d]
// is in AccLine blocks). Work items next to each other run on different threads at once and
// update these every tile, so each item's state has cache lines of its own: sharing the line
// at a boundary cost the dense 32k case 5-6% (2-core Sapphire Rapids VM, alternate runs).
struct alignas(64) Partial {
  float m[kMaxGroup];
  float l[kMaxGroup];
};
struct alignas(64) AccLine {
  float x[16];
};

// Scores, online softmax and accumulation over rows [r0, r1) of one KV head for g query rows.
// Row j's K/V: (idx ? base + idx[j] * d : base + j * d). raw (nullable): the scaled scores
// of the chunk's rows are written at raw[i * raw_stride + j] (j relative to the head's start).
template <typename E>
KVB_INLINE void attend_rows_body(const float* q, int64_t g, int64_t d, float scale,
                                 const E* k, const E* v, const int64_t* idx,
                                 int64_t r0, int64_t r1, float* m, float* l, float* acc,
                                 float* raw, int64_t raw_stride) {
  float s[kMaxGroup][kTile];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t T = std::min(kTile, r1 - t0);
    for (int64_t j = 0; j < T; ++j) {
      const int64_t row = idx ? idx[t0 + j] : t0 + j;
      const E* kr = k + row * d;
      for (int64_t i = 0; i < g; ++i) {
        const float* qi = q + i * d;
        float dot = 0.f;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < d; ++c) dot += qi[c] * load(kr, c);
        s[i][j] = dot * scale;
      }
    }
    for (int64_t i = 0; i < g; ++i) {
      if (raw)
        for (int64_t j = 0; j < T; ++j) raw[i * raw_stride + t0 + j] = s[i][j];
      float tmax = m[i];
      for (int64_t j = 0; j < T; ++j) tmax = std::max(tmax, s[i][j]);
      const float alpha = std::exp(m[i] - tmax);  // exp(-inf) = 0 on the first tile
      float sum = 0.f;
      for (int64_t j = 0; j < T; ++j) {
        s[i][j] = std::exp(s[i][j] - tmax);
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = tmax;
      if (alpha != 1.f) {
        float* a = acc + i * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) a[c] *= alpha;
      }
    }
    for (int64_t j = 0; j < T; ++j) {
      const int64_t row = idx ? idx[t0 + j] : t0 + j;
      const E* vr = v + row * d;
      for (int64_t i = 0; i < g; ++i) {
        const float p = s[i][j];
        float* a = acc + i * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) a[c] += p * load(vr, c);
      }
    }
  }
}

// Register-blocked variant for a compile-time group size kG and d % kW == 0: the QK dot
// products keep kG partial vectors per row; the PV update walks d in kW-wide slices, holding
// the kG accumulator slices in registers across the tile's rows (V rows of a tile stay in L1).
constexpr int64_t kW = 16;

template <int kG, typename E>
KVB_INLINE void attend_rows_blocked(const float* q, int64_t d, float scale, const E* k,
                                    const E* v, const int64_t* idx, int64_t r0, int64_t r1,
                                    float* m, float* l, float* acc, float* raw,
                                    int64_t raw_stride) {
  float s[kG][kTile];
  const E* vrows[kTile];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t T = std::min(kTile, r1 - t0);
    for (int64_t j = t0 + kTile, je = std::min(r1, t0 + 2 * kTile); j < je; ++j) {
      const int64_t row = idx ? idx[j] : j;
      for (int64_t c = 0; c < d; c += 16) {
        __builtin_prefetch(k + row * d + c);
        __builtin_prefetch(v + row * d + c);
      }
    }
    for (int64_t j = 0; j < T; ++j) {
      const int64_t row = idx ? idx[t0 + j] : t0 + j;
      const E* kr = k + row * d;
      vrows[j] = v + row * d;
      float part[kG][kW] = {};
      for (int64_t c0 = 0; c0 < d; c0 += kW)
        for (int i = 0; i < kG; ++i)
          for (int64_t x = 0; x < kW; ++x) part[i][x] += q[i * d + c0 + x] * load(kr, c0 + x);
      // Tree reduction (a serial 16-add chain per head would cost more than the FMAs).
      for (int i = 0; i < kG; ++i) {
        float r8[8], r4[4];
        for (int x = 0; x < 8; ++x) r8[x] = part[i][x] + part[i][x + 8];
        for (int x = 0; x < 4; ++x) r4[x] = r8[x] + r8[x + 4];
        s[i][j] = ((r4[0] + r4[2]) + (r4[1] + r4[3])) * scale;
      }
    }
    for (int i = 0; i < kG; ++i) {
      if (raw)
        for (int64_t j = 0; j < T; ++j) raw[i * raw_stride + t0 + j] = s[i][j];
      float tmax = m[i];
      for (int64_t j = 0; j < T; ++j) tmax = std::max(tmax, s[i][j]);
      const float alpha = std::exp(m[i] - tmax);
      float sum = 0.f;
      for (int64_t j = 0; j < T; ++j) {
        s[i][j] = std::exp(s[i][j] - tmax);
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = tmax;
      if (alpha != 1.f)
        for (int64_t c = 0; c < d; ++c) acc[i * d + c] *= alpha;
    }
    for (int64_t c0 = 0; c0 < d; c0 += kW) {
      float a[kG][kW];
      for (int i = 0; i < kG; ++i)
        for (int64_t x = 0; x < kW; ++x) a[i][x] = acc[i * d + c0 + x];
      for (int64_t j = 0; j < T; ++j) {
        const E* vr = vrows[j] + c0;
        for (int i = 0; i < kG; ++i) {
          const float p = s[i][j];
          for (int64_t x = 0; x < kW; ++x) a[i][x] += p * load(vr, x);
        }
      }
      for (int i = 0; i < kG; ++i)
        for (int64_t x = 0; x < kW; ++x) acc[i * d + c0 + x] = a[i][x];
    }
  }
}

// Picks the blocked variant when g is 1, 2, 4 or 8 and d % kW == 0.
template <typename E>
KVB_INLINE void attend_rows_dispatch(const float* q, int64_t g, int64_t d, float scale,
                                     const E* k, const E* v, const int64_t* idx,
                                     int64_t r0, int64_t r1, float* m, float* l, float* acc,
                                     float* raw, int64_t raw_stride) {
  if (d % kW == 0) {
    switch (g) {
      case 1: return attend_rows_blocked<1>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 2: return attend_rows_blocked<2>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 4: return attend_rows_blocked<4>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 8: return attend_rows_blocked<8>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      default: break;
    }
  }
  attend_rows_body(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
}

template <typename E>
void attend_rows_generic(const float* q, int64_t g, int64_t d, float scale, const E* k,
                         const E* v, const int64_t* idx, int64_t r0, int64_t r1, float* m,
                         float* l, float* acc, float* raw, int64_t raw_stride) {
  attend_rows_dispatch(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
}

#if KVB_X86_DISPATCH
// AVX2+FMA register-blocked rows for g in {1, 2, 4, 8} and d % 16 == 0: accumulators live in
// ymm registers (the portable blocked loop above gets them spilled by GCC), query heads in
// blocks of up to 4 so that 8 accumulators + 2 data registers fit in 16 ymm.
KVB_TARGET_AVX2 inline float hsum256(__m256 x) {
  __m128 lo = _mm256_castps256_ps128(x), hi = _mm256_extractf128_ps(x, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

// exp for 8 floats (Cephes expf polynomial, relative error ~2e-7; inputs clamped to
// [-87.3, 88.4], so exp(-inf) gives ~1e-38 instead of 0, negligible against the sum >= 1).
KVB_TARGET_AVX2 inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3365447504f));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.f)));
  const __m256i n = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

// 8 K/V elements widened to fp32.
KVB_TARGET_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
KVB_TARGET_AVX2 inline __m256 load8(const bf16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
KVB_TARGET_AVX2 inline __m256 load8(const f16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The tile's scores to exp(s - max), the running max m and sum l updated, the accumulators
// rescaled when the max moved. The tile's max is a vector reduction: a serial max over the
// tile's scores per query head would cost half as much as all of the tile's FMAs.
template <int kG>
KVB_TARGET_AVX2 void softmax_tile_avx2(float (&s)[kG][kTile], int64_t T, int64_t d, float* m,
                                       float* l, float* acc, float* raw, int64_t raw_stride,
                                       int64_t t0) {
  static_assert(kTile % 16 == 0);
  for (int i = 0; i < kG; ++i) {
    if (raw)
      for (int64_t j = 0; j < T; ++j) raw[i * raw_stride + t0 + j] = s[i][j];
    float tmax = m[i];
    if (T == kTile) {
      __m256 m0 = _mm256_loadu_ps(&s[i][0]), m1 = _mm256_loadu_ps(&s[i][8]);
      for (int64_t j = 16; j < kTile; j += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(&s[i][j]));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(&s[i][j + 8]));
      }
      const __m256 m8 = _mm256_max_ps(m0, m1);
      __m128 x = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
      x = _mm_max_ps(x, _mm_movehl_ps(x, x));
      x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
      tmax = std::max(tmax, _mm_cvtss_f32(x));
    } else {
      for (int64_t j = 0; j < T; ++j) tmax = std::max(tmax, s[i][j]);
    }
    const float alpha = tmax == m[i] ? 1.f : std::exp(m[i] - tmax);  // exp(-inf) = 0 at first
    float sum = 0.f;
    int64_t j = 0;
    if (T == kTile) {
      const __m256 mx = _mm256_set1_ps(tmax);
      __m256 total = _mm256_setzero_ps();
      for (; j < kTile; j += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(&s[i][j]), mx));
        _mm256_storeu_ps(&s[i][j], e);
        total = _mm256_add_ps(total, e);
      }
      sum = hsum256(total);
    }
    for (; j < T; ++j) {
      s[i][j] = std::exp(s[i][j] - tmax);
      sum += s[i][j];
    }
    l[i] = l[i] * alpha + sum;
    m[i] = tmax;
    if (alpha != 1.f) {
      const __m256 al = _mm256_set1_ps(alpha);
      for (int64_t c = 0; c < d; c += 8)
        _mm256_storeu_ps(acc + i * d + c, _mm256_mul_ps(al, _mm256_loadu_ps(acc + i * d + c)));
    }
  }
}

template <int kG, typename E>
KVB_TARGET_AVX2 void attend_rows_avx2_blocked(const float* q, int64_t d, float scale,
                                              const E* k, const E* v,
                                              const int64_t* idx, int64_t r0, int64_t r1,
                                              float* m, float* l, float* acc, float* raw,
                                              int64_t raw_stride) {
  constexpr int kB = kG < 4 ? kG : 4;  // query heads per register block
  const RowPrefetch plan = cpu_row_prefetch(int(sizeof(E)));
  float s[kG][kTile];
  const E* vrows[kTile];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t T = std::min(kTile, r1 - t0);
    for (int64_t j = 0; j < T; ++j) {
      const int64_t row = idx ? idx[t0 + j] : t0 + j;
      prefetch_ahead(k, v, idx, t0 + j, r1, d, plan);
      const E* kr = k + row * d;
      vrows[j] = v + row * d;
      for (int ib = 0; ib < kG; ib += kB) {
        __m256 a0[kB], a1[kB];
        for (int i = 0; i < kB; ++i) a0[i] = a1[i] = _mm256_setzero_ps();
        for (int64_t c0 = 0; c0 < d; c0 += 16) {
          const __m256 k0 = load8(kr + c0), k1 = load8(kr + c0 + 8);
          for (int i = 0; i < kB; ++i) {
            const float* qi = q + (ib + i) * d + c0;
            a0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qi), k0, a0[i]);
            a1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qi + 8), k1, a1[i]);
          }
        }
        for (int i = 0; i < kB; ++i) s[ib + i][j] = hsum256(_mm256_add_ps(a0[i], a1[i])) * scale;
      }
    }
    softmax_tile_avx2<kG>(s, T, d, m, l, acc, raw, raw_stride, t0);
    for (int ib = 0; ib < kG; ib += kB)
      for (int64_t c0 = 0; c0 < d; c0 += 16) {
        __m256 a0[kB], a1[kB];
        for (int i = 0; i < kB; ++i) {
          a0[i] = _mm256_loadu_ps(acc + (ib + i) * d + c0);
          a1[i] = _mm256_loadu_ps(acc + (ib + i) * d + c0 + 8);
        }
        for (int64_t j = 0; j < T; ++j) {
          const __m256 v0 = load8(vrows[j] + c0), v1 = load8(vrows[j] + c0 + 8);
          for (int i = 0; i < kB; ++i) {
            const __m256 p = _mm256_broadcast_ss(&s[ib + i][j]);
            a0[i] = _mm256_fmadd_ps(p, v0, a0[i]);
            a1[i] = _mm256_fmadd_ps(p, v1, a1[i]);
          }
        }
        for (int i = 0; i < kB; ++i) {
          _mm256_storeu_ps(acc + (ib + i) * d + c0, a0[i]);
          _mm256_storeu_ps(acc + (ib + i) * d + c0 + 8, a1[i]);
        }
      }
  }
}

template <typename E>
KVB_TARGET_AVX2 void attend_rows_avx2(const float* q, int64_t g, int64_t d, float scale,
                                      const E* k, const E* v, const int64_t* idx,
                                      int64_t r0, int64_t r1, float* m, float* l, float* acc,
                                      float* raw, int64_t raw_stride) {
  if (d % 16 == 0) {
    switch (g) {
      case 1: return attend_rows_avx2_blocked<1>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 2: return attend_rows_avx2_blocked<2>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 4: return attend_rows_avx2_blocked<4>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      case 8: return attend_rows_avx2_blocked<8>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
      default: break;
    }
  }
  attend_rows_dispatch(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
}

// AVX-512 rows for g in {1, 2, 4, 8} and d % 16 == 0. Twice the AVX2 path's lanes and twice
// its registers: the QK products of R rows x kB query heads (R * kB = 16) accumulate at once,
// each query slice loaded once for the R rows, and the 16 dot products are reduced together
// by one transposing tree (a horizontal sum per dot product would cost as much as its FMAs).
// Measured from cache (one core, fp32, g = 4): 28.7 GB/s against AVX2's 20.9.
//
// GCC 12's AVX-512 intrinsics pass an "undefined" vector to their builtins, which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
KVB_TARGET_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
KVB_TARGET_AVX512 inline __m512 load16(const bf16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
KVB_TARGET_AVX512 inline __m512 load16(const f16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lane x of the result = the sum of x[x]'s 16 lanes.
KVB_TARGET_AVX512 inline __m512 sum16x16(const __m512 (&x)[16]) {
  __m512 y[8], z[4], w[2];
  for (int p = 0; p < 8; ++p)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    y[p] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * p], x[2 * p + 1]),
                         _mm512_unpackhi_ps(x[2 * p], x[2 * p + 1]));
  for (int p = 0; p < 4; ++p) {  // per 128-bit lane: the lane's sums of x[4p .. 4p+3]
    const __m512d a = _mm512_castps_pd(y[2 * p]), b = _mm512_castps_pd(y[2 * p + 1]);
    z[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  for (int p = 0; p < 2; ++p)  // 128-bit lanes: pairs of z[2p]'s lanes, then z[2p+1]'s
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88),
                       _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
}

// Rows whose K lines the PV loop prefetches (kSpreadNta), one per V row it reads: row
// first + j beside the tile's row j, if below end; none when k is null.
template <typename E>
struct KeysAhead {
  const E* k = nullptr;
  const int64_t* idx = nullptr;
  int64_t first = 0, end = 0;
};

// acc[i, :] += sum_j s[i][j] * V[row j, :], kS zmm slices of each query head at a time.
template <int kG, int kS, typename E>
KVB_TARGET_AVX512 void accumulate_values_avx512(const float (&s)[kG][kTile],
                                                const E* const (&vrows)[kTile], int64_t T,
                                                int64_t d, float* acc, KeysAhead<E> ahead) {
  constexpr int kB = kG < 4 ? kG : 4;
  for (int ib = 0; ib < kG; ib += kB)
    for (int64_t c0 = 0; c0 < d; c0 += 16 * kS) {
      __m512 a[kB][kS];
      for (int i = 0; i < kB; ++i)
        for (int x = 0; x < kS; ++x) a[i][x] = _mm512_loadu_ps(acc + (ib + i) * d + c0 + 16 * x);
      for (int64_t j = 0; j < T; ++j) {
        __m512 vv[kS];
        for (int x = 0; x < kS; ++x) vv[x] = load16(vrows[j] + c0 + 16 * x);
        // The lines from this slice's start in a later K row (a line at most every 64 bytes:
        // with 16-bit elements and kS = 1 a slice is half a line).
        if (ib == 0 && ahead.k && ahead.first + j < ahead.end &&
            c0 * int64_t(sizeof(E)) % 64 == 0)
          prefetch_nta(row_at(ahead.k, ahead.idx, ahead.first + j, d) + c0,
                       std::max<int64_t>(64, 16 * kS * int64_t(sizeof(E))));
        for (int i = 0; i < kB; ++i) {
          const __m512 p = _mm512_set1_ps(s[ib + i][j]);
          for (int x = 0; x < kS; ++x) a[i][x] = _mm512_fmadd_ps(p, vv[x], a[i][x]);
        }
      }
      for (int i = 0; i < kB; ++i)
        for (int x = 0; x < kS; ++x) _mm512_storeu_ps(acc + (ib + i) * d + c0 + 16 * x, a[i][x]);
    }
}

template <int kG, int kS, typename E>
KVB_TARGET_AVX512 void attend_rows_avx512_blocked(const float* q, int64_t d, float scale,
                                                  const E* k, const E* v,
                                                  const int64_t* idx, int64_t r0, int64_t r1,
                                                  float* m, float* l, float* acc, float* raw,
                                                  int64_t raw_stride) {
  constexpr int kB = kG < 4 ? kG : 4;  // query heads per block
  constexpr int kR = 16 / kB;          // rows per block: kR * kB dot products reduced at once
  const RowPrefetch plan = cpu_row_prefetch(int(sizeof(E)));
  const bool spread = plan == RowPrefetch::kSpreadNta;
  if (spread) prefetch_first_rows_nta(k, v, idx, r0, r1, d);
  float s[kG][kTile];
  const E* vrows[kTile];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t T = std::min(kTile, r1 - t0);
    for (int64_t j0 = 0; j0 < T; j0 += kR) {
      const E* krows[kR];
      for (int r = 0; r < kR; ++r) {
        const int64_t jr = std::min<int64_t>(j0 + r, T - 1);  // a short block repeats its last row
        const int64_t row = idx ? idx[t0 + jr] : t0 + jr;
        krows[r] = k + row * d;
        vrows[jr] = v + row * d;
      }
      for (int ib = 0; ib < kG; ib += kB) {
        __m512 dots[16];  // dots[i * kR + r]: query head ib + i, row j0 + r
        for (__m512& x : dots) x = _mm512_setzero_ps();
        for (int64_t c0 = 0; c0 < d; c0 += 16) {
          // Prefetches spread among the FMAs: issued at once, they wait on the line-fill
          // buffers with no work beside them (measured: dense 32k, 94-96% of the one-stream
          // read_sum of then at once, 102-103% spread, Sapphire Rapids VM). kSpreadNta: at
          // each slice starting a 64-byte line, that line of each of kR later V rows
          // (kv_prefetch.h); otherwise one row's K and V at each of the first kR slices.
          if (ib == 0 && spread && c0 * int64_t(sizeof(E)) % 64 == 0) {
            for (int r = 0; r < kR; ++r) {
              const int64_t later = t0 + j0 + r + kSpreadValuesAhead;
              if (later < r1) prefetch_nta(row_at(v, idx, later, d) + c0, 1);
            }
          } else if (ib == 0 && !spread && c0 / 16 < kR) {
            prefetch_ahead(k, v, idx, t0 + j0 + c0 / 16, r1, d, plan);
          }
          __m512 qs[kB];
          for (int i = 0; i < kB; ++i) qs[i] = _mm512_loadu_ps(q + (ib + i) * d + c0);
          for (int r = 0; r < kR; ++r) {
            const __m512 kv = load16(krows[r] + c0);
            for (int i = 0; i < kB; ++i)
              dots[i * kR + r] = _mm512_fmadd_ps(qs[i], kv, dots[i * kR + r]);
          }
        }
        alignas(64) float sums[16];
        _mm512_store_ps(sums, _mm512_mul_ps(sum16x16(dots), _mm512_set1_ps(scale)));
        const int64_t rows = std::min<int64_t>(kR, T - j0);
        for (int i = 0; i < kB; ++i)
          for (int64_t r = 0; r < rows; ++r) s[ib + i][j0 + r] = sums[i * kR + r];
      }
      for (int64_t r = d / 16; !spread && r < kR; ++r)
        prefetch_ahead(k, v, idx, t0 + j0 + r, r1, d, plan);
    }
    softmax_tile_avx2<kG>(s, T, d, m, l, acc, raw, raw_stride, t0);
    const KeysAhead<E> ahead =
        spread ? KeysAhead<E>{k, idx, t0 + kSpreadKeysAhead, r1} : KeysAhead<E>{};
    accumulate_values_avx512<kG, kS>(s, vrows, T, d, acc, ahead);
  }
}

template <typename E>
KVB_TARGET_AVX512 void attend_rows_avx512(const float* q, int64_t g, int64_t d, float scale,
                                          const E* k, const E* v, const int64_t* idx,
                                          int64_t r0, int64_t r1, float* m, float* l,
                                          float* acc, float* raw, int64_t raw_stride) {
#define KVB_AVX512_ROWS(G, S) \
  return attend_rows_avx512_blocked<G, S>(q, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride)
  const bool wide = d % 64 == 0;  // 4 zmm slices of V per query head in the PV loop
  switch (g) {
    case 1: if (wide) KVB_AVX512_ROWS(1, 4); KVB_AVX512_ROWS(1, 1);
    case 2: if (wide) KVB_AVX512_ROWS(2, 4); KVB_AVX512_ROWS(2, 1);
    case 4: if (wide) KVB_AVX512_ROWS(4, 4); KVB_AVX512_ROWS(4, 1);
    default: if (wide) KVB_AVX512_ROWS(8, 4); KVB_AVX512_ROWS(8, 1);
  }
#undef KVB_AVX512_ROWS
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

template <typename E>
void attend_rows(const float* q, int64_t g, int64_t d, float scale, const E* k, const E* v,
                 const int64_t* idx, int64_t r0, int64_t r1, float* m, float* l, float* acc,
                 float* raw, int64_t raw_stride) {
#if KVB_X86_DISPATCH
  if (cpu_has_avx512f() && d % 16 == 0 && (g == 1 || g == 2 || g == 4 || g == 8))
    return attend_rows_avx512(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
  if (cpu_has_avx2_fma())
    return attend_rows_avx2(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
#endif
  attend_rows_generic(q, g, d, scale, k, v, idx, r0, r1, m, l, acc, raw, raw_stride);
}

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Shared driver. Head h's rows: count[h]; row j of head h lives at
// k_head[h] + (idx_head[h] ? idx_head[h][j] : j) * d.
template <typename E>
struct HeadRows {
  const E* k;
  const E* v;
  const int64_t* idx;  // nullptr: contiguous
  int64_t n;
  float* probs;        // nullptr or [g, n]
};

template <typename E>
void run(const float* q, float* out, int64_t Hq, int64_t Hkv, int64_t d, float scale,
         const std::vector<HeadRows<E>>& heads) {
  const int64_t g = Hq / Hkv;
  // Passes over the group when g > kMaxGroup (each pass re-reads K/V; rare in practice).
  const int64_t gp = std::min(g, kMaxGroup);
  const int64_t passes = (g + gp - 1) / gp;
  // Split rows so there are enough work items for the threads (split-K) but chunks stay long.
  const int threads = max_threads();
  int64_t max_n = 0;
  for (const HeadRows<E>& h : heads) max_n = std::max(max_n, h.n);
  int64_t chunks = decode_attention_chunks(threads, Hkv * passes, max_n);
  int64_t all_rows = 0;
  for (const HeadRows<E>& h : heads) all_rows += h.n;
  if (all_rows * d * int64_t(2 * sizeof(float)) < kParallelBytes) chunks = 1;  // serial anyway
  const int64_t items = Hkv * passes * chunks;
  std::vector<Partial> parts(items);
  const int64_t acc_stride = (gp * d + 15) / 16 * 16;  // floats, whole cache lines an item
  std::vector<AccLine> acc_lines(size_t(items * acc_stride / 16));
  float* const accs = acc_lines.data()->x;

  // Threads only when the call streams enough bytes to amortise a parallel region (tens of
  // microseconds when idle, a scheduler quantum when the cores are oversubscribed).
  const bool parallel = items > 1 && all_rows * d * int64_t(2 * sizeof(float)) >= kParallelBytes;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t h = it / (passes * chunks), p = (it / chunks) % passes, c = it % chunks;
    const HeadRows<E>& hr = heads[h];
    const int64_t g0 = p * gp, gn = std::min(gp, g - g0);
    const int64_t per = (hr.n + chunks - 1) / chunks;
    const int64_t r0 = std::min(hr.n, c * per), r1 = std::min(hr.n, r0 + per);
    Partial& part = parts[it];
    float* acc = accs + it * acc_stride;
    std::fill(acc, acc + gn * d, 0.f);
    for (int64_t i = 0; i < gn; ++i) {
      part.m[i] = -std::numeric_limits<float>::infinity();
      part.l[i] = 0.f;
    }
    if (r1 > r0)
      attend_rows(q + (h * g + g0) * d, gn, d, scale, hr.k, hr.v, hr.idx, r0, r1, part.m,
                  part.l, acc, hr.probs ? hr.probs + g0 * hr.n : nullptr, hr.n);
  }

  // Merge the chunks of each (head, pass); normalise probabilities if asked (serial: small).
  for (int64_t hp = 0; hp < Hkv * passes; ++hp) {
    const int64_t h = hp / passes, p = hp % passes;
    const int64_t g0 = p * gp, gn = std::min(gp, g - g0);
    const HeadRows<E>& hr = heads[h];
    for (int64_t i = 0; i < gn; ++i) {
      float M = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < chunks; ++c) M = std::max(M, parts[hp * chunks + c].m[i]);
      float* o = out + (h * g + g0 + i) * d;
      std::fill(o, o + d, 0.f);
      if (M == -std::numeric_limits<float>::infinity()) continue;  // no rows: zeros
      float L = 0.f;
      for (int64_t c = 0; c < chunks; ++c) {
        const Partial& part = parts[hp * chunks + c];
        if (part.l[i] == 0.f) continue;
        const float w = std::exp(part.m[i] - M);
        L += part.l[i] * w;
        const float* a = accs + (hp * chunks + c) * acc_stride + i * d;
        for (int64_t x = 0; x < d; ++x) o[x] += w * a[x];
      }
      const float inv = 1.f / L;
      for (int64_t x = 0; x < d; ++x) o[x] *= inv;
      if (hr.probs) {
        float* pr = hr.probs + (g0 + i) * hr.n;
        for (int64_t j = 0; j < hr.n; ++j) pr[j] = std::exp(pr[j] - M) * inv;
      }
    }
  }
}

}  // namespace

void dense_decode_attention(const float* q, const float* k, const float* v, float* out,
                            int64_t num_q_heads, int64_t num_kv_heads, int64_t n, int64_t d,
                            int64_t kv_head_stride, float scale) {
  std::vector<HeadRows<float>> heads(num_kv_heads);
  for (int64_t h = 0; h < num_kv_heads; ++h)
    heads[h] = HeadRows<float>{.k = k + h * kv_head_stride, .v = v + h * kv_head_stride,
                               .idx = nullptr, .n = n, .probs = nullptr};
  run(q, out, num_q_heads, num_kv_heads, d, scale, heads);
}

namespace {

template <typename E>
void sparse_rows(const float* q, const E* k_pool, const E* v_pool, const int64_t* offsets,
                 const int64_t* rows, float* out, int64_t num_q_heads, int64_t num_kv_heads,
                 int64_t d, float scale, float* probs, int64_t row_list_stride) {
  const int64_t g = num_q_heads / num_kv_heads;
  std::vector<HeadRows<E>> heads(num_kv_heads);
  for (int64_t h = 0; h < num_kv_heads; ++h)
    heads[h] = HeadRows<E>{.k = k_pool, .v = v_pool,
                           .idx = rows + (row_list_stride > 0 ? h * row_list_stride : offsets[h]),
                           .n = offsets[h + 1] - offsets[h],
                           .probs = probs ? probs + g * offsets[h] : nullptr};
  run(q, out, num_q_heads, num_kv_heads, d, scale, heads);
}

}  // namespace

void sparse_decode_attention(const float* q, const float* k_pool, const float* v_pool,
                             const int64_t* offsets, const int64_t* rows, float* out,
                             int64_t num_q_heads, int64_t num_kv_heads, int64_t d, float scale,
                             float* probs, int64_t row_list_stride) {
  sparse_rows(q, k_pool, v_pool, offsets, rows, out, num_q_heads, num_kv_heads, d, scale, probs,
              row_list_stride);
}

void sparse_decode_attention(const float* q, const void* k_pool, const void* v_pool,
                             KvElement element, const int64_t* offsets, const int64_t* rows,
                             float* out, int64_t num_q_heads, int64_t num_kv_heads, int64_t d,
                             float scale, float* probs, int64_t row_list_stride) {
  switch (element) {
    case KvElement::kF32:
      return sparse_rows(q, static_cast<const float*>(k_pool), static_cast<const float*>(v_pool),
                         offsets, rows, out, num_q_heads, num_kv_heads, d, scale, probs,
                         row_list_stride);
    case KvElement::kBF16:
      return sparse_rows(q, static_cast<const bf16*>(k_pool), static_cast<const bf16*>(v_pool),
                         offsets, rows, out, num_q_heads, num_kv_heads, d, scale, probs,
                         row_list_stride);
    case KvElement::kF16:
      return sparse_rows(q, static_cast<const f16*>(k_pool), static_cast<const f16*>(v_pool),
                         offsets, rows, out, num_q_heads, num_kv_heads, d, scale, probs,
                         row_list_stride);
  }
}

int64_t decode_attention_chunks(int threads, int64_t units, int64_t max_rows) {
  const int64_t want_items = int64_t(threads) * 4;
  const int64_t chunks = std::max<int64_t>(1, (want_items + units - 1) / units);
  return std::max<int64_t>(1, std::min(chunks, max_rows / kMinChunkRows));
}

int64_t decode_attention_bytes(int64_t num_q_heads, int64_t attended_rows_all_heads, int64_t d,
                               bool indexed) {
  return int64_t(sizeof(float)) * (2 * attended_rows_all_heads * d + 2 * num_q_heads * d) +
         (indexed ? int64_t(sizeof(int64_t)) * attended_rows_all_heads : 0);
}

}  // namespace kvb::kernels
