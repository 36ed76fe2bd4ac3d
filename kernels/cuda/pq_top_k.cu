// PQCache's selection of a decode step in one launch or two (kvbench_cuda.h pq_top_k has the
// contract; kernels/pq_scoring.cpp pq_top_k is the CPU kernel of the same method, and the adapter's
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
// keep. Long rows in two launches over slices of the row: a block per (slice, head) counts its
// slice, then a block per (slice, head) ranks from the summed counts and writes its slice's
// tokens, the earlier slices' counts giving its place in the row.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/radix_select.cuh"
#include "kernels/cuda/warp_sum.cuh"
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

// Slices' partial counts a thread of pq_select_kernel reads at once.
constexpr int kSlicesInFlight = 8;

// Entries of the table a warp computes at once in build_table.
constexpr int kEntriesInFlight = 4;

// The lookup table [g, m, K] of head h into shared memory: a warp per entry, q's sub-vector u
// of query head gi . centroid c of sub-space u, its lanes over the channels (consecutive loads)
// and summed by warp_sum, so every block of a head gets the same bits. A thread per entry, as
// before, read its centroid s floats apart from its neighbours', one load after another: about
// 30 us a block on the H100 in pq_kernel unstaged (scoring.cu), and a block of this kernel
// took about 80 us whether it had 8k or 32k tokens (2026-11-27). A warp takes kEntriesInFlight
// entries at once, channel by channel, so their loads are in flight together (one entry at a
// time, each waited on its loads: 16 round trips a warp for PQCache's 512 entries); each
// entry's sum runs over its channels in the same order as one at a time.
__device__ void build_table(const void* q, kernels::KvElement q_type, const float* centroids,
                            int h, int g, int m, int K, int s, float* table) {
  const int lane = threadIdx.x % 32, warps = int(blockDim.x) / 32, entries = g * m * K;
  const int64_t q_head = int64_t(h) * g * m * s;                  // head h's queries [g, m * s]
  const float* const head_centroids = centroids + int64_t(h) * m * K * s;  // [m, K, s]
  for (int e0 = int(threadIdx.x) / 32; e0 < entries; e0 += warps * kEntriesInFlight) {
    // Offsets within the head (ints: fewer registers under the 1024-thread block's 64).
    int qs[kEntriesInFlight];  // q's sub-vector u of query head gi, widened as read
    int cs[kEntriesInFlight];  // centroid c of sub-space u
    float acc[kEntriesInFlight];
#pragma unroll
    for (int i = 0; i < kEntriesInFlight; ++i) {
      const int e = min(e0 + i * warps, entries - 1);  // past the end: a copy, not stored
      const int gi = e / (m * K), u = (e / K) % m, c = e % K;
      qs[i] = (gi * m + u) * s;
      cs[i] = (u * K + c) * s;
      acc[i] = 0.f;
    }
    for (int x = lane; x < s; x += 32) {
#pragma unroll
      for (int i = 0; i < kEntriesInFlight; ++i)
        acc[i] += load_element(q, q_type, q_head + qs[i] + x) * head_centroids[cs[i] + x];
    }
#pragma unroll
    for (int i = 0; i < kEntriesInFlight; ++i) {
      const float sum = warp_sum(acc[i]);
      if (lane == 0 && e0 + i * warps < entries) table[e0 + i * warps] = sum;
    }
  }
}

// Adds tokens begin..end-1 of a head's codes to count [P] (shared memory, every thread): kItems
// tokens a thread an iteration, their codes all loaded before any is counted.
__device__ void count_tokens(const uint8_t* head_codes, int64_t codes_row, int m, int K,
                             int begin, int end, int* count) {
  for (int first = begin; first < end; first += int(blockDim.x) * kItems) {
    int c[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int j = first + i * int(blockDim.x) + int(threadIdx.x);
      c[i] = j < end ? combination(head_codes, codes_row, m, K, j) : -1;
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (c[i] >= 0) atomicAdd(&count[c[i]], 1);
  }
}

// weight[p] for every combination (shared memory, every thread; kThreads threads): per query
// head, the softmax's max and sum over the tokens, a combination's count tokens sharing one
// term. Thread t holds combinations t, t + kThreads, ... in registers. scratch: 32 floats.
__device__ void combination_weights(const int* count, const float* table, int g, int m, int K,
                                    int P, float scale, float* weight, float* scratch) {
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
      const int p = int(threadIdx.x) + i * kThreads;
      x[i] = tokens[i] > 0 ? combination_score(table, gi, m, K, p, scale) : 0.f;
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
}

// Tokens of slice s (of `slices` equal ones) of n: begin..end-1.
__device__ inline void slice_bounds(int n, int s, int slices, int& begin, int& end) {
  const int share = (n + slices - 1) / slices;
  begin = min(n, s * share);
  end = min(n, begin + share);
}

// The first of two launches for long rows: grid (slices, H), kThreads threads, dynamic shared
// count [P]. partial[(h * slices + s) * P + p]: slice s's tokens of combination p.
__global__ void __launch_bounds__(kThreads)
    pq_slice_counts_kernel(const uint8_t* __restrict__ codes, int64_t codes_row, int m, int K,
                           int n, int P, int32_t* __restrict__ partial) {
  extern __shared__ int count[];
  const int h = blockIdx.y, s = blockIdx.x, slices = gridDim.x;
  for (int p = threadIdx.x; p < P; p += blockDim.x) count[p] = 0;
  __syncthreads();
  int begin, end;
  slice_bounds(n, s, slices, begin, end);
  count_tokens(codes + int64_t(h) * m * codes_row, codes_row, m, K, begin, end, count);
  __syncthreads();
  int32_t* const mine = partial + (int64_t(h) * slices + s) * P;
  for (int p = threadIdx.x; p < P; p += blockDim.x) mine[p] = count[p];
}

// grid (slices, H), kThreads threads; dynamic shared memory: count [P] int, weight [P] float,
// table [g, m, K] float. Block (s, h) writes head h's selected tokens of slice s; slice 0 also
// the leading and trailing entries. One slice (partial null): the block counts the tokens
// itself, one launch in all; several: the counts are the slices' partial ones summed, every
// block of a head ranks the same combinations (the same bits: the same operations in the same
// order), and a slice's place in the output follows from the earlier slices' partial counts.
// out: each head's lead + k + trailing entries.
__global__ void __launch_bounds__(kThreads)
    pq_select_kernel(const void* __restrict__ q, kernels::KvElement q_type,
                     const float* __restrict__ centroids, const uint8_t* __restrict__ codes,
                     int64_t codes_row, int g, int m, int K, int s, int n, int P, float scale,
                     int k, int64_t lead, int64_t trailing, const int32_t* __restrict__ partial,
                     int64_t* __restrict__ out) {
  extern __shared__ int shared[];
  int* const count = shared;                                   // [P] tokens per combination
  float* const weight = reinterpret_cast<float*>(shared + P);  // [P]
  float* const table = weight + P;                             // [g, m, K]
  __shared__ int warp_totals[32];
  __shared__ float scratch[32];
  const int h = blockIdx.y, slice = blockIdx.x, slices = gridDim.x;
  int64_t* const o = out + int64_t(h) * (lead + k + trailing);
  if (slice == 0) {
    for (int64_t j = threadIdx.x; j < lead; j += blockDim.x) o[j] = j;
    for (int64_t j = threadIdx.x; j < trailing; j += blockDim.x) o[lead + k + j] = lead + n + j;
  }
  if (k == 0) return;  // the whole block
  // Each combination's tokens in all slices (count) and in the slices before this one (before:
  // thread t holds combinations t, t + kThreads, ..., as combination_weights does).
  // The slices' counts are read kSlicesInFlight at a time, all loaded before any is added:
  // one at a time, each addition waited on its load, 64 round trips to L2 a thread at 16
  // slices.
  const int32_t* const head_partial = partial ? partial + int64_t(h) * slices * P : nullptr;
  int before[kCombinationsPerThread];
#pragma unroll
  for (int i = 0; i < kCombinationsPerThread; ++i) {
    const int p = int(threadIdx.x) + i * kThreads;
    int total = 0;
    before[i] = 0;
    for (int t0 = 0; head_partial && p < P && t0 < slices; t0 += kSlicesInFlight) {
      int part[kSlicesInFlight];
#pragma unroll
      for (int j = 0; j < kSlicesInFlight; ++j)
        part[j] = t0 + j < slices ? head_partial[int64_t(t0 + j) * P + p] : 0;
#pragma unroll
      for (int j = 0; j < kSlicesInFlight; ++j) {
        if (t0 + j == slice) before[i] = total;
        total += part[j];
      }
    }
    if (p < P) count[p] = total;
  }
  build_table(q, q_type, centroids, h, g, m, K, s, table);
  __syncthreads();
  const uint8_t* const head_codes = codes + int64_t(h) * m * codes_row;
  if (!partial) {
    count_tokens(head_codes, codes_row, m, K, 0, n, count);
    __syncthreads();
  }
  combination_weights(count, table, g, m, K, P, scale, weight, scratch);
  __syncthreads();
  uint32_t threshold;
  int ties_taken;
  radix::select_threshold<true>(weight, count, P, k, threshold, ties_taken);
  // The earlier slices' tokens above the threshold and at it (block totals: the scans' third
  // argument).
  int above = 0, at_threshold = 0;
#pragma unroll
  for (int i = 0; i < kCombinationsPerThread; ++i) {
    const int p = int(threadIdx.x) + i * kThreads;
    const uint32_t key = p < P ? radix::order_key(weight[p]) : 0u;
    if (p < P && key > threshold) above += before[i];
    if (p < P && key == threshold) at_threshold += before[i];
  }
  int above_before, ties_before;
  block_exclusive_sum(above, warp_totals, above_before);
  block_exclusive_sum(at_threshold, warp_totals, ties_before);
  int begin, end;
  slice_bounds(n, slice, slices, begin, end);
  // The slice's tokens in order: those above the threshold and the first ties_taken at it.
  radix::for_each_taken(
      [&](int j) { return radix::order_key(weight[combination(head_codes, codes_row, m, K, j)]); },
      begin, end, threshold, ties_taken, ties_before, above_before + min(ties_before, ties_taken),
      warp_totals, [&](int j, int at) { o[lead + at] = lead + j; });
}

}  // namespace

size_t pq_top_k_shared_bytes(int64_t g, int64_t m, int64_t K) {
  return size_t(2 * kernels::pq_combinations(m, K) + g * m * K) * sizeof(float);
}

void pq_top_k(const void* q, kernels::KvElement q_type, const float* centroids,
              const uint8_t* codes, int64_t H, int64_t g, int64_t m, int64_t K, int64_t s,
              int64_t n, int64_t codes_row, float scale, int64_t k, int64_t lead,
              int64_t trailing, int64_t* out, int64_t slices, int32_t* partial, void* stream) {
  const int64_t P = kernels::pq_combinations(m, K);
  if (K < 1 || K > 256 || P > kernels::kPqMaxCombinations ||
      pq_top_k_shared_bytes(g, m, K) > kPqTopKSharedBytes ||
      n > 0x7fffffff - kThreads * kItems || k < 0 || k > n || H > 65535 || slices < 1 ||
      slices > kPqTopKMaxSlices || (slices > 1 && !partial))
    throw std::invalid_argument(
        "kvb::cuda::pq_top_k: needs 1 <= K <= 256, K^m <= 4096 code combinations, their tables "
        "in 45 KiB of shared memory, 0 <= k <= n below 2^31 - 2^13, H <= 65535 and 1 to 64 "
        "slices (several: the partial counts' buffer)");
  if (H == 0) return;
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>(H));
  if (slices > 1 && k > 0)
    pq_slice_counts_kernel<<<grid, kThreads, size_t(P) * sizeof(int), st>>>(
        codes, codes_row, int(m), int(K), int(n), int(P), partial);
  pq_select_kernel<<<grid, kThreads, pq_top_k_shared_bytes(g, m, K), st>>>(
      q, q_type, centroids, codes, codes_row, int(g), int(m), int(K), int(s), int(n), int(P),
      scale, int(k), lead, trailing, slices > 1 ? partial : nullptr, out);
}

}  // namespace kvb::cuda
