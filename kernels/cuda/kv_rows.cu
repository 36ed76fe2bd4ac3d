// New K and V rows into their pools in one launch (kvbench_cuda.h write_kv_rows; the CPU
// kernel: kernels/kv_rows.h): a decode step writes one row per KV head into each pool, where
// two index_copy_ calls launched two kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 256;

// Word w of row i of K (the first n * words) or of V (the rest), grid-strided; Word: the widest
// unit (4, 2 or 1 bytes) that divides a row and the addresses.
template <typename Word>
__global__ void write_kv_rows_kernel(Word* __restrict__ k_pool, Word* __restrict__ v_pool,
                                     const int64_t* __restrict__ rows, int64_t rows_stride,
                                     const Word* __restrict__ k, const Word* __restrict__ v,
                                     int64_t n, int64_t words) {
  const int64_t total = 2 * n * words;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < total;
       x += int64_t(gridDim.x) * blockDim.x) {
    const bool is_v = x >= n * words;
    const int64_t y = is_v ? x - n * words : x, i = y / words, w = y % words;
    (is_v ? v_pool : k_pool)[rows[i * rows_stride] * words + w] = (is_v ? v : k)[i * words + w];
  }
}

template <typename Word>
void launch(void* k_pool, void* v_pool, const int64_t* rows, int64_t rows_stride, const void* k,
            const void* v, int64_t n, int64_t row_bytes, cudaStream_t stream) {
  const int64_t words = row_bytes / int64_t(sizeof(Word));
  const int64_t blocks = std::min<int64_t>((2 * n * words + kThreads - 1) / kThreads, 65535);
  write_kv_rows_kernel<Word><<<unsigned(blocks), kThreads, 0, stream>>>(
      static_cast<Word*>(k_pool), static_cast<Word*>(v_pool), rows, rows_stride,
      static_cast<const Word*>(k), static_cast<const Word*>(v), n, words);
}

}  // namespace

void write_kv_rows(void* k_pool, void* v_pool, const int64_t* rows, int64_t rows_stride,
                   const void* k, const void* v, int64_t n, int64_t row_bytes, void* stream) {
  if (n == 0 || row_bytes == 0) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The widest word that divides the rows and every base address (a view may start anywhere).
  const uintptr_t bases =
      reinterpret_cast<uintptr_t>(k_pool) | reinterpret_cast<uintptr_t>(v_pool) |
      reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v) | uintptr_t(row_bytes);
  if (bases % 4 == 0)
    return launch<uint32_t>(k_pool, v_pool, rows, rows_stride, k, v, n, row_bytes, s);
  if (bases % 2 == 0)
    return launch<uint16_t>(k_pool, v_pool, rows, rows_stride, k, v, n, row_bytes, s);
  launch<uint8_t>(k_pool, v_pool, rows, rows_stride, k, v, n, row_bytes, s);
}

}  // namespace kvb::cuda
