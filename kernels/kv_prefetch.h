// Software prefetch of the K/V rows a decode attention kernel is about to read, shared by the
// kernel (decode_attention.cpp) and the benchmark that times its reads alone (`kv_stream`).
#pragma once

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
// hardware prefetcher), as the CPU's plan says (cpu_row_prefetch): kTwoLevels, for fp32 rows,
// row j + 64 into L2 and row j + 8 from there into L1; kL1Near, row j + 8 into L1; otherwise,
// and for 16-bit rows under kTwoLevels, row j + 16 into L1.
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
// Sapphire Rapids: 26.4-27.0 GB/s against 23.8-26.2.
template <typename E>
KVB_INLINE void prefetch_ahead(const E* k, const E* v, const int64_t* idx, int64_t j, int64_t r1,
                               int64_t d, RowPrefetch plan) {
  if (sizeof(E) == 4 && plan == RowPrefetch::kTwoLevels) {
    prefetch_row<2>(k, v, idx, j + 64, r1, d);
    prefetch_row<3>(k, v, idx, j + 8, r1, d);
  } else if (plan == RowPrefetch::kL1Near) {
    prefetch_row<3>(k, v, idx, j + 8, r1, d);
  } else {
    prefetch_row<3>(k, v, idx, j + 16, r1, d);
  }
}

}  // namespace kvb::kernels
