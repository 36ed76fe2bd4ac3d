// ClusterKV's centroid update (one block per head, shared-memory accumulation, strided
// threads). The decode step's rows are cluster_rows.cu's; the cosine assignment is ATen's bmm
// + argmax on a GPU (engine/kernel_adapter.cpp says why).
#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace

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
