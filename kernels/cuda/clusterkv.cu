// ClusterKV's K-means steps: the centroid update (one block per head, shared-memory
// accumulation, strided threads) and, for 16-bit keys, the cosine assignment on tensor cores
// with the argmax fused (fp32 keys: ATen's bmm + argmax, engine/kernel_adapter.cpp says why).
// The decode step's rows are cluster_rows.cu's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// One block per head; sums [C, d] and counts [C] in shared memory.
__global__ void centroid_update_shared(const float* keys, const int32_t* labels, const float* old,
                                       float* out, int32_t* counts, int n, int C, int d) {
  extern __shared__ float smem[];
  float* sums = smem;                                       // [C, d]
  int* cnt = reinterpret_cast<int*>(smem + int64_t(C) * d);  // [C]
  const int h = blockIdx.x;
  for (int x = threadIdx.x; x < C * d; x += blockDim.x) sums[x] = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) cnt[c] = 0;
  __syncthreads();
  // Strided over (key, channel) pairs: consecutive threads read consecutive channels.
  const int64_t total = int64_t(n) * d;
  for (int64_t e = threadIdx.x; e < total; e += blockDim.x) {
    const int64_t j = e / d;
    const int x = int(e % d);
    const int c = labels[int64_t(h) * n + j];
    atomicAdd(&sums[c * d + x], keys[int64_t(h) * n * d + e]);
    if (x == 0) atomicAdd(&cnt[c], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < C * d; e += blockDim.x) {
    const int c = e / d;
    const int64_t o = int64_t(h) * C * d + e;
    out[o] = cnt[c] > 0 ? sums[e] / float(cnt[c]) : old[o];
  }
  if (counts)
    for (int c = threadIdx.x; c < C; c += blockDim.x) counts[int64_t(h) * C + c] = cnt[c];
}

// Fallback for C * (d + 1) beyond shared memory: sums in `out` (zeroed), counts in `counts`.
__global__ void centroid_accumulate_global(const float* keys, const int32_t* labels, float* sums,
                                           int32_t* counts, int n, int C, int d) {
  const int h = blockIdx.y;
  const int64_t total = int64_t(n) * d;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / d;
    const int x = int(e % d);
    const int c = labels[int64_t(h) * n + j];
    atomicAdd(&sums[(int64_t(h) * C + c) * d + x], keys[int64_t(h) * n * d + e]);
    if (x == 0) atomicAdd(&counts[int64_t(h) * C + c], 1);
  }
}

__global__ void centroid_finish_global(const float* old, float* out, const int32_t* counts,
                                       int64_t HCd, int d) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < HCd;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int32_t c = counts[e / d];
    out[e] = c > 0 ? out[e] / float(c) : old[e];
  }
}

// The fused assignment: a block labels kAssignRows keys of one head, a warp 16 of them. Its
// warps keep their keys' tiles in registers (matrix_a fragments, d / 16 of them) and stream the
// head's centroids through shared memory kAssignCols at a time; each 16 x 16 product runs on
// tensor cores with fp32 sums, is stored to shared memory, and each lane then ranks half a
// row's columns, every similarity first rounded to the keys' dtype: ATen's bmm in bf16 writes
// bf16 similarities, and its argmax ranks those (ties: the lowest id; a NaN above all). The
// [H, n, C] similarities never reach memory: at 128k ATen's path wrote and read back 3.4 GB a
// Lloyd step and took 8.0 ms on the H100 (2026-11-27) for 0.44 TFLOP of products.
constexpr int kAssignWarps = 8;
constexpr int kAssignRows = 16 * kAssignWarps;
constexpr int kAssignCols = 32;          // centroids a tile: two 16-column products a warp
constexpr int kAssignScoresLd = kAssignCols + 4;  // a row of stored similarities, padded
constexpr int kAssignMaxD = 128;
constexpr int kAssignPad = 8;  // elements after each staged row: rows d + 8 apart, not d, so
                               // a fragment's 16 rows do not fall on the same 8 banks

// Whether similarity (v, i) ranks before (best, at) in ATen's argmax: a NaN before any number
// (the first NaN), then the larger, ties to the lower id.
__device__ inline bool ranks_before(float v, int i, float best, int at) {
  if (isnan(v) || isnan(best)) return isnan(v) && (!isnan(best) || i < at);
  return v > best || (v == best && i < at);
}

// Dynamic shared memory of the assignment: the block's keys while its warps load their
// fragments, then two centroid tiles (one in use, the next one landing) and the stored
// similarities.
size_t assign_shared_bytes(int64_t d) {
  const size_t row = size_t(d + kAssignPad) * 2;
  const size_t keys = size_t(kAssignRows) * row;
  const size_t tiles = 2 * size_t(kAssignCols) * row +
                       size_t(kAssignRows) * kAssignScoresLd * sizeof(float);
  return keys > tiles ? keys : tiles;
}

// grid (ceil(n / kAssignRows), H), kAssignWarps warps. keys [H, n, d], centroids [H, C, d]
// (normalised, of the keys' type), labels [H, n]; d = 16 * kSteps <= kAssignMaxD (a
// compile-time count, so that the fragments stay in registers). Each centroid tile is copied
// in (cp.async) while the one before it is multiplied and ranked.
template <typename T, int kSteps>
__global__ void __launch_bounds__(kAssignWarps * 32)
    cosine_assign_kernel(const T* __restrict__ keys, const T* __restrict__ centroids,
                         int64_t* __restrict__ labels, int n, int C) {
  using namespace nvcuda;
  constexpr int d = 16 * kSteps, vectors = d / 8;  // 8 T a uint4
  constexpr int ld = d + kAssignPad;                // a staged row's elements
  constexpr int kTile = kAssignCols * ld;           // a centroid tile's elements
  // wmma wants 32-byte aligned addresses: the array is declared so aligned (uint4 alone
  // promises 16), and every offset below is a multiple of 32 bytes.
  extern __shared__ __align__(128) uint4 shared_raw[];
  T* const staged = reinterpret_cast<T*>(shared_raw);  // [kAssignRows, ld], then two tiles
  float* const scores = reinterpret_cast<float*>(staged + 2 * kTile);  // [kAssignRows, ld]
  const int h = blockIdx.y, first = int(blockIdx.x) * kAssignRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* const head_keys = keys + int64_t(h) * n * d;
  const T* const head_centroids = centroids + int64_t(h) * C * d;
  // The block's keys, zeros past n (a fragment reads 16 whole rows).
  for (int v = threadIdx.x; v < kAssignRows * vectors; v += blockDim.x) {
    const int row = v / vectors;
    shared_raw[row * (ld / 8) + v % vectors] = first + row < n
                        ? reinterpret_cast<const uint4*>(head_keys + int64_t(first + row) * d)[v % vectors]
                        : uint4{0u, 0u, 0u, 0u};
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[kSteps];
#pragma unroll
  for (int k = 0; k < kSteps; ++k)
    wmma::load_matrix_sync(a[k], staged + warp * 16 * ld + k * 16, unsigned(ld));
  __syncthreads();  // every warp's fragments loaded: the keys' shared memory is free
  // Centroids c0 .. c0 + kAssignCols - 1 into tile buffer `buffer` (zeros past C), one commit
  // group per tile.
  auto copy_tile = [&](int c0, int buffer) {
    uint4* const tile = reinterpret_cast<uint4*>(staged + buffer * kTile);
    for (int v = threadIdx.x; v < kAssignCols * vectors; v += blockDim.x) {
      const int c = c0 + v / vectors;
      uint4* const to = tile + (v / vectors) * (ld / 8) + v % vectors;
      if (c < C)
        __pipeline_memcpy_async(to,
                                reinterpret_cast<const uint4*>(head_centroids + int64_t(c) * d) +
                                    v % vectors,
                                sizeof(uint4));
      else
        *to = uint4{0u, 0u, 0u, 0u};
    }
    __pipeline_commit();
  };
  // Lane l ranks row l / 2 of its warp's 16, columns (l % 2) * 16 .. + 16 of each tile.
  const int row = warp * 16 + lane / 2, half = lane % 2;
  float best = -INFINITY;
  int at = 0x7fffffff;  // nothing yet: any similarity, -inf too, ranks before it
  copy_tile(0, 0);
  for (int t = 0, c0 = 0; c0 < C; ++t, c0 += kAssignCols) {
    if (c0 + kAssignCols < C) copy_tile(c0 + kAssignCols, (t + 1) % 2);
    else __pipeline_commit();  // an empty group: tile t's is always the one before the last
    __pipeline_wait_prior(1);  // this thread's copies of tile t landed
    __syncthreads();           // every thread's
    const T* const tile = staged + (t % 2) * kTile;
    for (int j = 0; j < kAssignCols / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sum;
      wmma::fill_fragment(sum, 0.f);
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        // Centroids j*16.. as the product's columns: [16 centroids, d] row-major is col-major B.
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
        wmma::load_matrix_sync(b, tile + j * 16 * ld + k * 16, unsigned(ld));
        wmma::mma_sync(sum, a[k], b, sum);
      }
      wmma::store_matrix_sync(scores + warp * 16 * kAssignScoresLd + j * 16, sum,
                              unsigned(kAssignScoresLd), wmma::mem_row_major);
    }
    __syncwarp();  // the warp's similarities stored before its lanes read each other's
    for (int x = 0; x < 16; ++x) {
      const int col = half * 16 + x, c = c0 + col;
      const float v = widen(narrow_to<T>(scores[row * kAssignScoresLd + col]));
      if (c < C && ranks_before(v, c, best, at)) best = v, at = c;
    }
    __syncthreads();  // tile t read by every warp before the next iteration copies into it
  }
  __pipeline_wait_prior(0);  // the last, empty group
  // The two halves of a row: the better of the two.
  const float other = __shfl_xor_sync(0xffffffffu, best, 1);
  const int other_at = __shfl_xor_sync(0xffffffffu, at, 1);
  if (ranks_before(other, other_at, best, at)) best = other, at = other_at;
  if (half == 0 && first + row < n) labels[int64_t(h) * n + first + row] = at;
}

}  // namespace

// n and C stop a block's rows (first + 127) and tiles (c0 + 32) short of int's end.
bool cosine_assign_supported(int64_t n, int64_t d, int64_t C) {
  constexpr int64_t kMaxCount = 0x7fffffff - kAssignRows;
  return d % 16 == 0 && d >= 16 && d <= kAssignMaxD && C >= 1 && C <= kMaxCount && n >= 0 &&
         n <= kMaxCount;
}

void cosine_assign(const void* keys, const void* centroids, kernels::KvElement type,
                   int64_t* labels, int64_t H, int64_t n, int64_t C, int64_t d, void* stream) {
  if (!cosine_assign_supported(n, d, C) || type == kernels::KvElement::kF32 || H > 65535)
    throw std::invalid_argument(
        "kvb::cuda::cosine_assign: needs bf16 or f16 keys, d a multiple of 16 up to 128, "
        "1 <= C and n <= 2^31 - 129, H <= 65535");
  if (H == 0 || n == 0) return;
  const dim3 grid(unsigned((n + kAssignRows - 1) / kAssignRows), unsigned(H));
  const size_t shared = assign_shared_bytes(d);
  const cudaStream_t st = as_stream(stream);
  auto launch = [&](auto steps) {
    constexpr int kSteps = decltype(steps)::value;
    if (type == kernels::KvElement::kBF16)
      cosine_assign_kernel<__nv_bfloat16, kSteps><<<grid, kAssignWarps * 32, shared, st>>>(
          static_cast<const __nv_bfloat16*>(keys), static_cast<const __nv_bfloat16*>(centroids),
          labels, int(n), int(C));
    else
      cosine_assign_kernel<__half, kSteps><<<grid, kAssignWarps * 32, shared, st>>>(
          static_cast<const __half*>(keys), static_cast<const __half*>(centroids), labels,
          int(n), int(C));
  };
  switch (d / 16) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 5: return launch(std::integral_constant<int, 5>{});
    case 6: return launch(std::integral_constant<int, 6>{});
    case 7: return launch(std::integral_constant<int, 7>{});
    default: return launch(std::integral_constant<int, 8>{});
  }
}

void centroid_update(const float* keys, const int32_t* labels, const float* old, float* out,
                     int64_t H, int64_t n, int64_t C, int64_t d, int32_t* counts, void* stream) {
  if (H == 0) return;
  const size_t shared = size_t(C) * (d + 1) * sizeof(float);
  if (shared <= 48 * 1024) {
    centroid_update_shared<<<unsigned(H), kThreads, shared, as_stream(stream)>>>(
        keys, labels, old, out, counts, int(n), int(C), int(d));
    return;
  }
  // counts is required scratch on this path.
  cudaMemsetAsync(out, 0, size_t(H * C * d) * sizeof(float), as_stream(stream));
  cudaMemsetAsync(counts, 0, size_t(H * C) * sizeof(int32_t), as_stream(stream));
  centroid_accumulate_global<<<dim3(64, unsigned(H)), kThreads, 0, as_stream(stream)>>>(
      keys, labels, out, counts, int(n), int(C), int(d));
  centroid_finish_global<<<256, kThreads, 0, as_stream(stream)>>>(old, out, counts, H * C * d, int(d));
}

}  // namespace kvb::cuda
