#include "kernels/kmeans_assign.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/simd.h"

namespace kvb::kernels {
namespace {

constexpr int64_t kKeyTile = 64;

// Keys [j0, j1) of one head against normalised centroids cn [C, d]. The argmax of k.c_hat
// equals that of cos(k, c) (|k| > 0 scales every candidate alike).
template <int kUnused>
KVB_INLINE void assign_body(const float* keys, const float* cn, int32_t* labels, int64_t j0,
                            int64_t j1, int64_t C, int64_t d) {
  for (int64_t j = j0; j < j1; ++j) {
    const float* k = keys + j * d;
    float best = -INFINITY;
    int32_t arg = 0;
    for (int64_t c = 0; c < C; ++c) {
      const float* m = cn + c * d;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t x = 0; x < d; ++x) s += k[x] * m[x];
      if (s > best) {
        best = s;
        arg = int32_t(c);
      }
    }
    labels[j] = arg;
  }
}

void assign_generic(const float* keys, const float* cn, int32_t* labels, int64_t j0, int64_t j1,
                    int64_t C, int64_t d) {
  assign_body<0>(keys, cn, labels, j0, j1, C, d);
}
#if KVB_X86_DISPATCH
KVB_TARGET_AVX2 void assign_avx2(const float* keys, const float* cn, int32_t* labels, int64_t j0,
                                 int64_t j1, int64_t C, int64_t d) {
  assign_body<0>(keys, cn, labels, j0, j1, C, d);
}
#endif

}  // namespace

void cosine_assign(const float* keys, const float* centroids, int32_t* labels, int64_t H,
                   int64_t n, int64_t C, int64_t d) {
  std::vector<float> cn(size_t(H * C * d));
  for (int64_t hc = 0; hc < H * C; ++hc) {
    const float* c = centroids + hc * d;
    double norm = 0;
    for (int64_t x = 0; x < d; ++x) norm += double(c[x]) * c[x];
    const float inv = float(1.0 / std::max(std::sqrt(norm), 1e-12));
    for (int64_t x = 0; x < d; ++x) cn[hc * d + x] = c[x] * inv;
  }
  const int64_t tiles = (n + kKeyTile - 1) / kKeyTile;
#pragma omp parallel for schedule(dynamic, 4) if (H * n * C * d >= (1 << 18))
  for (int64_t it = 0; it < H * tiles; ++it) {
    const int64_t h = it / tiles, j0 = (it % tiles) * kKeyTile, j1 = std::min(n, j0 + kKeyTile);
    const float* kh = keys + h * n * d;
    const float* ch = cn.data() + h * C * d;
    int32_t* lh = labels + h * n;
#if KVB_X86_DISPATCH
    if (cpu_has_avx2_fma()) {
      assign_avx2(kh, ch, lh, j0, j1, C, d);
      continue;
    }
#endif
    assign_generic(kh, ch, lh, j0, j1, C, d);
  }
}

void centroid_update(const float* keys, const int32_t* labels, const float* old, float* out,
                     int64_t H, int64_t n, int64_t C, int64_t d, int64_t* counts) {
#pragma omp parallel for schedule(dynamic, 1) if (H > 1 && n * d >= (1 << 14))
  for (int64_t h = 0; h < H; ++h) {
    std::vector<float> sums(size_t(C * d), 0.f);
    std::vector<int64_t> cnt(size_t(C), 0);
    const float* kh = keys + h * n * d;
    const int32_t* lh = labels + h * n;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t c = lh[j];
      ++cnt[c];
      float* s = sums.data() + c * d;
      const float* k = kh + j * d;
#pragma omp simd
      for (int64_t x = 0; x < d; ++x) s[x] += k[x];
    }
    for (int64_t c = 0; c < C; ++c) {
      float* o = out + (h * C + c) * d;
      const float* prev = old + (h * C + c) * d;
      if (cnt[c] == 0) {
        if (o != prev) std::copy(prev, prev + d, o);
      } else {
        const float inv = 1.f / float(cnt[c]);
        for (int64_t x = 0; x < d; ++x) o[x] = sums[c * d + x] * inv;
      }
      if (counts) counts[h * C + c] = cnt[c];
    }
  }
}

}  // namespace kvb::kernels
