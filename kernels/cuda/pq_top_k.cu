// PQCache's selection of a decode step in one launch (kvbench_cuda.h pq_top_k has the contract;
// kernels/pq_scoring.cpp pq_top_k is the CPU kernel of the same method, and the adapter's
// composition softmax(pq_scores).sum -> top_k_ascending the reference it must equal up to
// rounding). It replaces four launches a layer (the scores, ATen's softmax and sum, the top-k)
// and their [H, g, n] and [H, n] fp32 intermediates: at 128k the top-k alone took 237 us a
// layer on the H100 (2026-11-26), the scores 99 us.
//
// A block per KV head. A token's scores depend only on its m codes: the block counts the
// tokens of each of the K^m code combinations in shared memory (one pass over the codes), then
// computes each combination's weight, sum over the query heads of exp(score - max) / sum, with
// the max and sum taken over the combinations weighted by their counts; the radix select of
// kernels/cuda/radix_select.cuh finds the k-th largest weight over the combinations, each
// weighing its token count; a second pass over the codes writes the tokens above it and the
// first of those at it, in index order, at the prefix sums of what the threads before them
// keep.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/radix_select.cuh"
#include "kernels/pq_scoring.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 1024;  // 32 warps: the scans' warp totals fit one warp
constexpr int kCombinationsPerThread = int(kernels::kPqMaxCombinations) / kThreads;
static_assert(kCombinationsPerThread * kThreads == kernels::kPqMaxCombinations);
using radix::block_exclusive_sum;
using radix::kItems;

// Token j's code combination: its m codes as base-K digits, sub-space 0 the most significant.
__device__ inline int combination(const uint8_t* __restrict__ codes, int64_t codes_row, int m,
                                  int K, int j) {
  int c = 0;
  for (int u = 0; u < m; ++u) c = c * K + codes[u * codes_row + j];
  return c;
}

// Query head gi's score for combination p, its sub-spaces summed in order (the CPU kernels'
// and pq_kernel's order), times scale.
__device__ inline float combination_score(const float* table, int gi, int m, int K, int p,
                                          float scale) {
  int weight = 1;
  for (int u = 1; u < m; ++u) weight *= K;
  float total = 0.f;
  for (int u = 0; u < m; ++u, weight /= K) total += table[(gi * m + u) * K + p / weight % K];
  return total * scale;
}

// a NaN stays, as in ATen's max (fmaxf would drop it)
__device__ inline float max_keeping_nan(float a, float b) { return isnan(a) || b <= a ? a : b; }

// x reduced over the block by `op` (every thread gets it); scratch: 32 floats of shared memory.
template <typename Op>
__device__ float block_reduce(float x, float* scratch, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float all = scratch[0];
  for (int w = 1; w < int(blockDim.x) / 32; ++w) all = op(all, scratch[w]);
  __syncthreads();  // scratch is reused by the next call
  return all;
}

// grid (H), kThreads threads; dynamic shared memory: count [P] int, weight [P] float, table
// [g, m, K] float. out: the head's lead + k + trailing entries.
__global__ void __launch_bounds__(kThreads)
    pq_top_k_kernel(const void* __restrict__ q, kernels::KvElement q_type,
                    const float* __restrict__ centroids, const uint8_t* __restrict__ codes,
                    int64_t codes_row, int g, int m, int K, int s, int n, int P, float scale,
                    int k, int64_t lead, int64_t trailing, int64_t* __restrict__ out) {
  extern __shared__ int shared[];
  int* const count = shared;                                   // [P] tokens per combination
  float* const weight = reinterpret_cast<float*>(shared + P);  // [P]
  float* const table = weight + P;                             // [g, m, K]
  __shared__ int warp_totals[32];
  __shared__ float scratch[32];
  const int h = blockIdx.x;
  int64_t* const o = out + int64_t(h) * (lead + k + trailing);
  for (int64_t j = threadIdx.x; j < lead; j += blockDim.x) o[j] = j;
  for (int64_t j = threadIdx.x; j < trailing; j += blockDim.x) o[lead + k + j] = lead + n + j;
  if (k == 0) return;  // the whole block
  for (int p = threadIdx.x; p < P; p += blockDim.x) count[p] = 0;
  for (int e = threadIdx.x; e < g * m * K; e += blockDim.x) {
    const int gi = e / (m * K), u = (e / K) % m, c = e % K;
    const int64_t qs = (int64_t(h) * g + gi) * m * s + int64_t(u) * s;  // q's sub-vector u
    const float* cs = centroids + ((int64_t(h) * m + u) * K + c) * s;
    float acc = 0.f;
    for (int x = 0; x < s; ++x) acc += load_element(q, q_type, qs + x) * cs[x];
    table[e] = acc;
  }
  __syncthreads();
  const uint8_t* const head_codes = codes + int64_t(h) * m * codes_row;
  // The counts: kItems tokens a thread an iteration, their codes all loaded before any count.
  for (int first = 0; first < n; first += int(blockDim.x) * kItems) {
    int c[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int j = first + i * int(blockDim.x) + int(threadIdx.x);
      c[i] = j < n ? combination(head_codes, codes_row, m, K, j) : -1;
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (c[i] >= 0) atomicAdd(&count[c[i]], 1);
  }
  __syncthreads();
  // The weights: per query head, the softmax's max and sum over the tokens, a combination's
  // tokens sharing one term. Thread t holds combinations t, t + kThreads, ... in registers.
  int tokens[kCombinationsPerThread];
  float w[kCombinationsPerThread];
#pragma unroll
  for (int i = 0; i < kCombinationsPerThread; ++i) {
    const int p = int(threadIdx.x) + i * kThreads;
    tokens[i] = p < P ? count[p] : 0;
    w[i] = 0.f;
  }
  for (int gi = 0; gi < g; ++gi) {
    float x[kCombinationsPerThread], e[kCombinationsPerThread];
    float top = -INFINITY;
#pragma unroll
    for (int i = 0; i < kCombinationsPerThread; ++i) {
      x[i] = tokens[i] > 0 ? combination_score(table, gi, m, K, int(threadIdx.x) + i * kThreads, scale) : 0.f;
      if (tokens[i] > 0) top = max_keeping_nan(top, x[i]);
    }
    top = block_reduce(top, scratch, [](float a, float b) { return max_keeping_nan(a, b); });
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kCombinationsPerThread; ++i) {
      e[i] = expf(x[i] - top);
      if (tokens[i] > 0) sum += float(tokens[i]) * e[i];
    }
    sum = block_reduce(sum, scratch, [](float a, float b) { return a + b; });
#pragma unroll
    for (int i = 0; i < kCombinationsPerThread; ++i)
      if (tokens[i] > 0) w[i] += e[i] / sum;
  }
#pragma unroll
  for (int i = 0; i < kCombinationsPerThread; ++i)
    if (int(threadIdx.x) + i * kThreads < P) weight[int(threadIdx.x) + i * kThreads] = w[i];
  __syncthreads();
  uint32_t threshold;
  int ties_taken;
  radix::select_threshold<true>(weight, count, P, k, threshold, ties_taken);
  // The tokens in order: those above the threshold and the first ties_taken at it.
  radix::for_each_taken(
      [&](int j) { return radix::order_key(weight[combination(head_codes, codes_row, m, K, j)]); },
      n, threshold, ties_taken, warp_totals, [&](int j, int at) { o[lead + at] = lead + j; });
}

}  // namespace

size_t pq_top_k_shared_bytes(int64_t g, int64_t m, int64_t K) {
  return size_t(2 * kernels::pq_combinations(m, K) + g * m * K) * sizeof(float);
}

void pq_top_k(const void* q, kernels::KvElement q_type, const float* centroids,
              const uint8_t* codes, int64_t H, int64_t g, int64_t m, int64_t K, int64_t s,
              int64_t n, int64_t codes_row, float scale, int64_t k, int64_t lead,
              int64_t trailing, int64_t* out, void* stream) {
  const int64_t P = kernels::pq_combinations(m, K);
  if (K < 1 || K > 256 || P > kernels::kPqMaxCombinations ||
      pq_top_k_shared_bytes(g, m, K) > kPqTopKSharedBytes ||
      n > 0x7fffffff - kThreads * kItems || k < 0 || k > n || H > 0x7fffffff)
    throw std::invalid_argument(
        "kvb::cuda::pq_top_k: needs K <= 256, K^m <= 4096 code combinations, their tables in "
        "46 KiB of shared memory, 0 <= k <= n and n below 2^31 - 2^13");
  if (H == 0) return;
  pq_top_k_kernel<<<unsigned(H), kThreads, pq_top_k_shared_bytes(g, m, K),
                    static_cast<cudaStream_t>(stream)>>>(
      q, q_type, centroids, codes, codes_row, int(g), int(m), int(K), int(s), int(n), int(P),
      scale, int(k), lead, trailing, out);
}

}  // namespace kvb::cuda
