// Quest page scoring and PQCache table scoring.
#include <cuda_runtime.h>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 256;
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// grid (ceil(P / kThreads), H); thread = page; the group's queries in shared memory.
__global__ void quest_kernel(const float* q, const float* kmin, const float* kmax, float* scores,
                             int g, int P, int d, int64_t head_stride, bool sum_group) {
  extern __shared__ float qs[];  // [g, d]
  const int h = blockIdx.y;
  for (int x = threadIdx.x; x < g * d; x += blockDim.x) qs[x] = q[int64_t(h) * g * d + x];
  __syncthreads();
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= P) return;
  const float* lo = kmin + h * head_stride + int64_t(p) * d;
  const float* hi = kmax + h * head_stride + int64_t(p) * d;
  float total = 0.f;
  for (int i = 0; i < g; ++i) {
    float s = 0.f;
    for (int c = 0; c < d; ++c) s += fmaxf(qs[i * d + c] * hi[c], qs[i * d + c] * lo[c]);
    if (sum_group) total += s;
    else scores[(int64_t(h) * g + i) * P + p] = s;
  }
  if (sum_group) scores[int64_t(h) * P + p] = total;
}

// grid (ceil(n / kThreads), H): table [g, m, K] in shared memory, thread = token.
__global__ void pq_kernel(const float* q, const float* centroids, const uint8_t* codes,
                          float* scores, int g, int m, int K, int s, int n) {
  extern __shared__ float table[];  // [g, m, K]
  const int h = blockIdx.y;
  for (int e = threadIdx.x; e < g * m * K; e += blockDim.x) {
    const int gi = e / (m * K), i = (e / K) % m, c = e % K;
    const float* qs = q + (int64_t(h) * g + gi) * m * s + i * s;
    const float* cs = centroids + ((int64_t(h) * m + i) * K + c) * s;
    float acc = 0.f;
    for (int x = 0; x < s; ++x) acc += qs[x] * cs[x];
    table[e] = acc;
  }
  __syncthreads();
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  for (int gi = 0; gi < g; ++gi) {
    float total = 0.f;
    for (int i = 0; i < m; ++i) total += table[(gi * m + i) * K + codes[(int64_t(h) * m + i) * n + j]];
    scores[(int64_t(h) * g + gi) * n + j] = total;
  }
}

}  // namespace

void quest_page_scores(const float* q, const float* kmin, const float* kmax, float* scores,
                       int64_t H, int64_t g, int64_t P, int64_t d, int64_t head_stride,
                       bool sum_group, void* stream) {
  if (H == 0 || P == 0) return;
  dim3 grid(unsigned((P + kThreads - 1) / kThreads), unsigned(H));
  quest_kernel<<<grid, kThreads, size_t(g * d) * sizeof(float), as_stream(stream)>>>(
      q, kmin, kmax, scores, int(g), int(P), int(d), head_stride, sum_group);
}

void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n, void* stream) {
  if (H == 0 || n == 0) return;
  dim3 grid(unsigned((n + kThreads - 1) / kThreads), unsigned(H));
  pq_kernel<<<grid, kThreads, size_t(g * m * K) * sizeof(float), as_stream(stream)>>>(
      q, centroids, codes, scores, int(g), int(m), int(K), int(s), int(n));
}

}  // namespace kvb::cuda
