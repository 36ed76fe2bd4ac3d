// Software prefetch of the K/V rows a decode attention kernel is about to read, shared by the
// kernel (decode_attention.cpp) and the benchmark that times its reads alone (`kv_stream`,
// which follows the AVX-512 kernel's schedule).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/simd.h"

namespace kvb::kernels {

// One row's K and V lines prefetched, if row j < r1 exists; kLocality as __builtin_prefetch's
// (3: T0, into L1; 2: T1, into L2).
template <int kLocality, typename E>
KVB_INLINE void prefetch_row(const E* k, const E* v, const int64_t* idx, int64_t j, int64_t r1,
                             int64_t d) {
  if (j >= r1) return;
  const int64_t row = idx ? idx[j] : j;
  for (int64_t c = 0; c < d; c += int64_t(64 / sizeof(E))) {
    __builtin_prefetch(k + row * d + c, 0, kLocality);
    __builtin_prefetch(v + row * d + c, 0, kLocality);
  }
}

// Software prefetch, one row's lines per row attended (paged or indexed rows defeat the
// hardware prefetcher), as the CPU's plan for the rows' element width says
// (cpu_row_prefetch): kTwoLevels, row j + 64 into L2 and row j + 8 from there into L1;
// kSpreadNta (where a kernel does not spread its prefetches, below), row j + 8 into L1;
// kL1, row j + 16 into L1.
// Measured (dense 32k, fp32, 2 threads): 14 ms without prefetch, 10-11 ms with T0 at 16 rows
// (2-core Zen 3 EPYC VM, where single-level distances of 8-64 rows gained nothing); on a
// 2-core Sapphire Rapids VM `BM_dense_decode/32768` at 95-96% of the one-stream `BM_read_sum`
// of then with T0 at 16 rows, 111-115% with the two levels (alternate runs); later sessions
// there found them 10-11% faster than T0 alone 8 rows ahead in one sweep and as fast in
// another (PERFORMANCE.md, 2026-11-29). On a 2-core Zen 5 EPYC VM (2026-11-30) the two levels
// were the slowest: 32.0-33.8 GB/s against 37.4-38.4 with T0 alone 8 rows ahead and 34.2-35.7
// at 16, eight alternate rounds; bf16 rows there took
// 3.94-4.61 ms at 8 rows against 4.24-4.75 at 16 (six rounds, each faster at 8). 16-bit rows
// (`BM_all_rows_bf16`) measured faster with T0 at 16 rows than with the two levels on the
// Sapphire Rapids: 26.4-27.0 GB/s against 23.8-26.2. On a 2-core Zen 4 EPYC VM (2026-12-01,
// alternate runs) the two levels were the fastest for fp32 rows, 16 rows ahead the slowest: dense
// 32k 10.4-10.6 ms against 13.8-14.3 spread and 14.7-15.4 at 16 rows (AVX2's kernel 9.3-10.4
// against 11.4-13.3 at 8 rows); bf16 rows in the AVX2 kernel (Zen 4's default) 5.34-6.18 ms in
// two levels against 6.41-7.07 at 8 rows and 6.48-7.12 at 16 (five and three rounds).
template <typename E>
KVB_INLINE void prefetch_ahead(const E* k, const E* v, const int64_t* idx, int64_t j, int64_t r1,
                               int64_t d, RowPrefetch plan) {
  if (plan == RowPrefetch::kTwoLevels) {
    prefetch_row<2>(k, v, idx, j + 64, r1, d);
    prefetch_row<3>(k, v, idx, j + 8, r1, d);
  } else if (plan == RowPrefetch::kSpreadNta) {
    prefetch_row<3>(k, v, idx, j + 8, r1, d);
  } else {
    prefetch_row<3>(k, v, idx, j + 16, r1, d);
  }
}

// kSpreadNta: the AVX-512 kernel (decode_attention.cpp) prefetches each row's K lines while it
// multiplies an earlier tile's V rows, and each row's V lines while it scores an earlier tile's
// K rows, so that prefetches leave all through the tile (in its first block of query heads),
// non-temporally (PREFETCHNTA, for lines read once: the CPU may keep them out of its outer
// caches; why it is faster here was not measured, no performance counters in the VM). Row j's
// K lines go out while the kernel multiplies row j - kSpreadKeysAhead's V, its V lines while
// it scores row j - kSpreadValuesAhead's K (distances in rows: K rows 20-31 ahead of a tile's
// start belong to the next tile, read soon after their last slices leave). Before, the kernel
// prefetched both 8 rows ahead into L1 during the scores alone, half of each tile, in bursts.
// Measured on a 2-core Zen 5 EPYC VM (2026-12-01; dense 32k, fp32, 2 threads; a throwaway
// driver timing configurations in turn beside an 8-stream read-only sum in one process, 8-10
// rounds, medians of the rounds' shares of that sum): the old schedule 59-73%; spread into L1
// 62-68%, into L2 68%; spread non-temporally 71-89% over K 16-28 rows ahead and V 12-24 (flat
// from K 20 on; 20 / 16 taken); spread with K or V alone non-temporal 70-75%; the old schedule
// non-temporal 67%.
constexpr int64_t kSpreadKeysAhead = 20;
constexpr int64_t kSpreadValuesAhead = 16;

template <typename E>
KVB_INLINE const E* row_at(const E* base, const int64_t* idx, int64_t j, int64_t d) {
  return base + (idx ? idx[j] : j) * d;
}

// The cache lines of bytes [p, p + bytes), non-temporally.
KVB_INLINE void prefetch_nta(const void* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64)
    __builtin_prefetch(static_cast<const char*>(p) + b, 0, 0);
}

// Before the first tile: the K rows and V rows that no earlier tile's steps prefetch (36 rows
// at once, a burst each call: short sparse lists pay it per KV head).
template <typename E>
KVB_INLINE void prefetch_first_rows_nta(const E* k, const E* v, const int64_t* idx, int64_t r0,
                                        int64_t r1, int64_t d) {
  const int64_t row_bytes = d * int64_t(sizeof(E));
  for (int64_t j = r0; j < std::min(r1, r0 + kSpreadKeysAhead); ++j)
    prefetch_nta(row_at(k, idx, j, d), row_bytes);
  for (int64_t j = r0; j < std::min(r1, r0 + kSpreadValuesAhead); ++j)
    prefetch_nta(row_at(v, idx, j, d), row_bytes);
}

}  // namespace kvb::kernels
