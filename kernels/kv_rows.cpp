#include "kernels/kv_rows.h"

#include <cstring>

namespace kvb::kernels {

void write_kv_rows(void* k_pool, void* v_pool, const int64_t* rows, int64_t rows_stride,
                   const void* k, const void* v, int64_t n, int64_t row_bytes) {
  auto* kp = static_cast<char*>(k_pool);
  auto* vp = static_cast<char*>(v_pool);
  const auto* ks = static_cast<const char*>(k);
  const auto* vs = static_cast<const char*>(v);
  // Threads for a prefill's rows; a decode step's few rows are copied inline.
#pragma omp parallel for schedule(static) if (n * row_bytes >= (int64_t(1) << 20))
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows[i * rows_stride];
    std::memcpy(kp + row * row_bytes, ks + i * row_bytes, size_t(row_bytes));
    std::memcpy(vp + row * row_bytes, vs + i * row_bytes, size_t(row_bytes));
  }
}

}  // namespace kvb::kernels
