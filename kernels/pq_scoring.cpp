#include "kernels/pq_scoring.h"

#include <algorithm>
#include <vector>

namespace kvb::kernels {

void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n,
               int64_t codes_row) {
  // Tables [H, g, m, K]: small (K <= 256), built first.
  std::vector<float> table(size_t(H * g * m * K));
#pragma omp parallel for schedule(static) if (H * g * m * K * s >= (1 << 16))
  for (int64_t hgi = 0; hgi < H * g * m; ++hgi) {
    const int64_t h = hgi / (g * m), i = hgi % m, gi = (hgi / m) % g;
    const float* qs = q + (h * g + gi) * m * s + i * s;
    const float* cs = centroids + (h * m + i) * K * s;
    float* t = table.data() + hgi * K;
    for (int64_t c = 0; c < K; ++c) {
      float acc = 0.f;
      for (int64_t x = 0; x < s; ++x) acc += qs[x] * cs[c * s + x];
      t[c] = acc;
    }
  }
  // Scores: tokens in chunks; per sub-space one streaming pass over its codes.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (H * g * m * n >= (1 << 16))
  for (int64_t it = 0; it < H * chunks; ++it) {
    const int64_t h = it / chunks, j0 = (it % chunks) * kChunk, j1 = std::min(n, j0 + kChunk);
    for (int64_t gi = 0; gi < g; ++gi) {
      float* out = scores + (h * g + gi) * n;
      std::fill(out + j0, out + j1, 0.f);
      for (int64_t i = 0; i < m; ++i) {
        const float* t = table.data() + ((h * g + gi) * m + i) * K;
        const uint8_t* cd = codes + (h * m + i) * codes_row;
        for (int64_t j = j0; j < j1; ++j) out[j] += t[cd[j]];
      }
    }
  }
}

}  // namespace kvb::kernels
