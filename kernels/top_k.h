// The k largest scores of each row, by index (engine/kernel_adapter.h top_k_ascending on the
// CPU; the GPU's kernels/cuda/top_pages.cu keeps the same rule).
#pragma once
#include <cstdint>
#include <cstring>

namespace kvb::kernels {

// A score's key in that order: a larger score, a larger key; -0 and +0 one key; every NaN the
// largest key (NaNs tie). kernels/cuda/radix_select.cuh order_key is the GPU's.
inline uint32_t rank_key(float f) {
  if (f != f) return 0xffffffffu;
  if (f == 0.f) f = 0.f;
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Per row of scores [rows, n] (fp32, rows `stride` floats apart): out [rows, lead + k +
// trailing] int64 holds 0 .. lead - 1, then lead + the indices of the row's k largest scores
// in ascending order, then lead + n .. lead + n + trailing - 1. Ties at the k-th score go to
// the lower indices; NaN ranks above every number (NaNs tie with each other); -0 ties +0.
// Needs 0 <= k <= n.
void top_k_ascending(const float* scores, int64_t rows, int64_t n, int64_t stride, int64_t k,
                     int64_t lead, int64_t trailing, int64_t* out);

}  // namespace kvb::kernels
