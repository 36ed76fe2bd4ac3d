// New K and V rows written into their paged pools in one call: the rows of a decode step's
// token (one per KV head) or of a prefill, k_pool[rows[i]] = k[i] and v_pool[rows[i]] = v[i].
// What ATen does in two index_copy_ calls (two launches on a GPU). Framework-free.
#pragma once
#include <cstdint>

namespace kvb::kernels {

// k_pool, v_pool: [pool rows, row_bytes] bytes; k, v: [n, row_bytes]; rows: n distinct pool
// rows, rows_stride apart (1: packed; a column of a block table: its width). Rows are copied
// as bytes (any element type). Threads when there are many bytes.
void write_kv_rows(void* k_pool, void* v_pool, const int64_t* rows, int64_t rows_stride,
                   const void* k, const void* v, int64_t n, int64_t row_bytes);

}  // namespace kvb::kernels
