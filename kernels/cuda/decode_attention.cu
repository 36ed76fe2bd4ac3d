// Paged sparse GQA decode attention, flash-decoding style (kvbench_cuda.h has the contract).
//
// Pass 1, grid (splits, units), kWarps warps per block: split s of unit u takes a contiguous
// share of the unit's row list, and the group's g query heads are served from one read of each
// K/V row (online softmax: running max m, sum l, accumulator per query head in registers).
// Two kernels do pass 1:
//  - vector_split_kernel, where a row is a power-of-two number (<= 32) of 16-byte vectors and
//    the pools are 16-byte aligned (Llama's d = 128 in bf16: 16 lanes a row): a warp copies
//    kRowsInFlight rows per lane group an iteration into shared memory (cp.async), kStages - 1
//    iterations ahead of the one it computes, because a decode step is bound by how many bytes
//    are in flight, not by arithmetic; scores are reduced over the row's lanes, the softmax is
//    updated once per tile of rows;
//  - scalar_split_kernel otherwise (odd head dims): one row per warp at a time, lane l holding
//    channels [l*CPL, l*CPL + CPL).
// Both merge their warps in shared memory into one partial (m, l, acc) per (unit, split, query
// head) in the workspace and, when probabilities are asked for, write each row's raw score.
// Pass 2, grid (units, g): the splits of each unit merged by their log-sum-exp weights; the raw
// scores normalised into probabilities by the unit's max and sum.
// Empty units (no rows) give zeros, as the engine's gathered path does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/warp_sum.cuh"

namespace kvb::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;           // query heads per unit
constexpr int kMaxChannelsPerLane = 8;  // d <= 256
constexpr int kRowsPerSplit = 64;       // the least rows worth a block of its own
constexpr int kRowsInFlight = 4;        // rows each lane group of vector_split_kernel copies at once
constexpr int kStages = 3;              // its iterations a warp's ring holds: 2 in flight, 1 computed

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// exp(a - b) for a running max a that may still be -inf (no row seen): 0, never NaN.
__device__ inline float rescale(float a, float b) { return a == -INFINITY ? 0.f : __expf(a - b); }

// This block's share of its unit's row list: rows[first + begin .. first + end), of the unit's
// n. The list starts at indptr[unit] (packed) or, with a row_list_stride, at
// unit * row_list_stride.
struct SplitRows {
  int64_t first, begin, end, n;
};
__device__ inline SplitRows split_rows(const int64_t* indptr, int64_t row_list_stride) {
  const int unit = blockIdx.y, split = blockIdx.x, splits = gridDim.x;
  const int64_t n = indptr[unit + 1] - indptr[unit];
  const int64_t first = row_list_stride > 0 ? unit * row_list_stride : indptr[unit];
  const int64_t share = (n + splits - 1) / splits;
  const int64_t begin = min(n, int64_t(split) * share);
  return {first, begin, min(n, begin + share), n};
}

// Where the unit's raw scores [g, n] go in `probs` (laid out as decode_attention's
// probabilities: unit u's at g * indptr[u]); null without probs.
__device__ inline float* unit_scores(float* probs, const int64_t* indptr, int g) {
  return probs ? probs + int64_t(g) * indptr[blockIdx.y] : nullptr;
}

// A lane's online-softmax state for channels [c0, c0 + C) of each of the unit's G (>= g) query
// heads: the query scaled (zeros past d or g), nothing accumulated yet.
template <int G, int C>
__device__ inline void start_state(const void* q, kernels::KvElement q_type, int g, int d, int c0,
                                   float scale, float (&qr)[G][C], float (&acc)[G][C],
                                   float (&m)[G], float (&l)[G]) {
#pragma unroll
  for (int i = 0; i < G; ++i) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int ch = c0 + c;
      qr[i][c] =
          ch < d && i < g ? load_element(q, q_type, (int64_t(blockIdx.y) * g + i) * d + ch) * scale
                          : 0.f;
      acc[i][c] = 0.f;
    }
    m[i] = -INFINITY;
    l[i] = 0.f;
  }
}

// The end of pass 1: each warp's state (lane 0..: channels [c0, c0 + C) of every query head)
// goes to shared memory, then the block's warps are merged into the split's partial.
template <int G, int C>
__device__ void store_split(const float (&m)[G], const float (&l)[G], const float (&acc)[G][C],
                            float* warp_acc, float (*warp_m)[kMaxGroup],
                            float (*warp_l)[kMaxGroup], int c0, int g, int d, float* part_acc,
                            float* part_ml) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < G; ++i) {
    if (i >= g) break;
    if (lane == 0) warp_m[warp][i] = m[i], warp_l[warp][i] = l[i];
#pragma unroll
    for (int c = 0; c < C; ++c)
      if (c0 + c < d) warp_acc[(warp * g + i) * d + c0 + c] = acc[i][c];
  }
  __syncthreads();
  const int64_t part = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
  for (int x = threadIdx.x; x < g * d; x += blockDim.x) {
    const int i = x / d;
    float top = -INFINITY;
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, warp_m[w][i]);
    float sum = 0.f, value = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float weight = rescale(warp_m[w][i], top);
      sum += warp_l[w][i] * weight;
      value += warp_acc[(w * g + i) * d + x % d] * weight;
    }
    part_acc[part * g * d + x] = value;
    if (x % d == 0) part_ml[(part * g + i) * 2] = top, part_ml[(part * g + i) * 2 + 1] = sum;
  }
}

// The pool rows of a warp-iteration's list entries base + r * kGroups + group (0 from `end` on:
// not read) of a list starting at rows[first].
template <int kGroups>
__device__ inline void read_row_ids(const int64_t* __restrict__ rows, int64_t first, int64_t end,
                                    int64_t base, int group, int64_t (&row)[kRowsInFlight]) {
#pragma unroll
  for (int r = 0; r < kRowsInFlight; ++r) {
    const int64_t j = base + r * kGroups + group;
    row[r] = j < end ? rows[first + j] : 0;
  }
}

// The shared memory of vector_split_kernel: each warp's ring of kStages iterations' K and V
// vectors, [kWarps, kStages, 2, kRowsInFlight, 32] 16-byte vectors; after the loop the same
// bytes hold the warps' accumulators [kWarps, g, d] for store_split, which always fit.
constexpr size_t kVectorSharedBytes =
    size_t(kWarps) * kStages * 2 * kRowsInFlight * 32 * sizeof(uint4);
static_assert(size_t(kWarps) * kMaxGroup * 32 * kMaxChannelsPerLane * sizeof(float) <=
              kVectorSharedBytes);

// LPR lanes a row (E = 16 / sizeof(T) elements each, so d = LPR * E), 32 / LPR rows a warp-load.
// A lane copies its 16 bytes of K and V of kRowsInFlight rows an iteration into its own slots of
// the warp's ring (cp.async: no registers held while in flight), kStages - 1 iterations ahead
// of the one it computes; it reads back only what it copied itself, so neither the warp nor
// the block waits on another lane. Where the loads went to registers (2026-11-27 and before),
// a warp waited for its loads before computing them and had nothing in flight while it
// computed; its 166 registers (Llama's shape) left 3 blocks an SM, and the kernel read 1.7-2.1
// TB/s of the H100's 3. kMinBlocks: the blocks an SM must hold (__launch_bounds__; 1: as many
// registers as ptxas wants, 158 for Llama's shape on sm_90, so 3 blocks; DecodeRegisters).
template <typename T, int LPR, int G, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    vector_split_kernel(const void* __restrict__ q, kernels::KvElement q_type,
                                    const T* __restrict__ k_pool,
                                    const T* __restrict__ v_pool,
                                    const int64_t* __restrict__ indptr,
                                    const int64_t* __restrict__ rows, int64_t row_list_stride,
                                    float* __restrict__ part_acc, float* __restrict__ part_ml,
                                    float* __restrict__ probs, int g, float scale) {
  constexpr int E = 16 / sizeof(T), d = LPR * E, kGroups = 32 / LPR;
  constexpr int kTile = kGroups * kRowsInFlight;  // rows a warp takes per iteration
  extern __shared__ uint4 ring[];  // kVectorSharedBytes: the ring, then the accumulators
  __shared__ float warp_m[kWarps][kMaxGroup], warp_l[kWarps][kMaxGroup];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / LPR, c0 = (lane % LPR) * E;  // the row of the warp-load, channels
  const SplitRows split = split_rows(indptr, row_list_stride);
  // Named copies, not structured bindings: the lambdas below capture them (C++17).
  const int64_t first = split.first, begin = split.begin, end = split.end, n = split.n;
  float* const scores = unit_scores(probs, indptr, g);
  float qr[G][E], acc[G][E], m[G], l[G];
  start_state<G, E>(q, q_type, g, d, c0, scale, qr, acc, m, l);
  constexpr int64_t kStride = int64_t(kWarps) * kTile;  // rows between a warp's iterations
  const int64_t start = begin + int64_t(warp) * kTile;  // the warp's first iteration
  const int iterations = start < end ? int((end - start + kStride - 1) / kStride) : 0;
  // This lane's slot of iteration it's row r of K (kv 0) or V (kv 1).
  uint4* const lane_ring = ring + size_t(warp) * kStages * 2 * kRowsInFlight * 32 + lane;
  auto slot = [lane_ring](int it, int kv, int r) {
    return lane_ring + ((size_t(it % kStages) * 2 + kv) * kRowsInFlight + r) * 32;
  };
  // Copies of iteration `it` (its pool rows in `row`) started, as one commit group; a group
  // is committed for every iteration, empty past the last, so that waiting for all but the
  // newest kStages - 1 groups means iteration it's have landed.
  auto start_copies = [&](int it, const int64_t (&row)[kRowsInFlight]) {
    const int64_t base = start + it * kStride;
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r)
      if (it < iterations && base + r * kGroups + group < end) {
        __pipeline_memcpy_async(slot(it, 0, r), k_pool + row[r] * d + c0, sizeof(uint4));
        __pipeline_memcpy_async(slot(it, 1, r), v_pool + row[r] * d + c0, sizeof(uint4));
      }
    __pipeline_commit();
  };
  // The pool rows of the next iteration to start, read one start ahead: a start's copies
  // need their rows' ids, which would otherwise be a dependent load in front of them.
  int64_t row[kRowsInFlight];
  read_row_ids<kGroups>(rows, first, end, start, group, row);
  for (int it = 0; it < kStages - 1; ++it) {
    start_copies(it, row);
    read_row_ids<kGroups>(rows, first, end, start + (it + 1) * kStride, group, row);
  }
  for (int it = 0; it < iterations; ++it) {
    const int ahead = it + kStages - 1;
    start_copies(ahead, row);
    read_row_ids<kGroups>(rows, first, end, start + (ahead + 1) * kStride, group, row);
    __pipeline_wait_prior(kStages - 1);  // iteration it's copies
    const int64_t base = start + it * kStride;
    bool valid[kRowsInFlight];  // slots of rows not copied are not read
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r) valid[r] = base + r * kGroups + group < end;
    float s[kRowsInFlight][G];
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r) {
      float kf[E];
      unpack_vector<T, E>(valid[r] ? *slot(it, 0, r) : uint4{}, kf);
#pragma unroll
      for (int i = 0; i < G; ++i) {
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < E; ++c) dot += qr[i][c] * kf[c];
        dot = lane_group_sum<LPR>(dot);
        s[r][i] = valid[r] ? dot : -INFINITY;
        if (scores && valid[r] && i < g && lane % LPR == 0)
          scores[int64_t(i) * n + base + r * kGroups + group] = dot;
      }
    }
#pragma unroll
    for (int i = 0; i < G; ++i) {
      if (i >= g) break;
      float top = m[i];
#pragma unroll
      for (int r = 0; r < kRowsInFlight; ++r) top = fmaxf(top, s[r][i]);
      const float old = rescale(m[i], top);
      l[i] *= old;
#pragma unroll
      for (int c = 0; c < E; ++c) acc[i][c] *= old;
      m[i] = top;
#pragma unroll
      for (int r = 0; r < kRowsInFlight; ++r) s[r][i] = valid[r] ? __expf(s[r][i] - top) : 0.f;
    }
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r) {
      float vf[E];
      unpack_vector<T, E>(valid[r] ? *slot(it, 1, r) : uint4{}, vf);
#pragma unroll
      for (int i = 0; i < G; ++i) {
        if (i >= g) break;
        l[i] += s[r][i];
#pragma unroll
        for (int c = 0; c < E; ++c) acc[i][c] += s[r][i] * vf[c];
      }
    }
  }
  // The warp's lane groups hold the same channels of different rows: merge them.
#pragma unroll
  for (int offset = LPR; offset < 32; offset <<= 1) {
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const float m_other = __shfl_xor_sync(0xffffffffu, m[i], offset);
      const float l_other = __shfl_xor_sync(0xffffffffu, l[i], offset);
      const float top = fmaxf(m[i], m_other);
      const float mine = rescale(m[i], top), theirs = rescale(m_other, top);
      l[i] = l[i] * mine + l_other * theirs;
#pragma unroll
      for (int c = 0; c < E; ++c)
        acc[i][c] = acc[i][c] * mine + __shfl_xor_sync(0xffffffffu, acc[i][c], offset) * theirs;
      m[i] = top;
    }
  }
  __pipeline_wait_prior(0);  // the trailing empty groups: nothing is still copied into the ring
  __syncthreads();           // every warp done with its ring before it holds accumulators
  store_split<G, E>(m, l, acc, reinterpret_cast<float*>(ring), warp_m, warp_l,
                    lane < LPR ? c0 : d, g, d, part_acc, part_ml);
}

template <typename T, int CPL, int G>
__global__ void scalar_split_kernel(const void* __restrict__ q, kernels::KvElement q_type,
                             const T* __restrict__ k_pool,
                             const T* __restrict__ v_pool, const int64_t* __restrict__ indptr,
                             const int64_t* __restrict__ rows, int64_t row_list_stride,
                             float* __restrict__ part_acc, float* __restrict__ part_ml,
                             float* __restrict__ probs, int g, int d, float scale) {
  extern __shared__ float warp_acc[];  // [kWarps, g, d]
  __shared__ float warp_m[kWarps][kMaxGroup], warp_l[kWarps][kMaxGroup];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto [first, begin, end, n] = split_rows(indptr, row_list_stride);
  float* const scores = unit_scores(probs, indptr, g);
  float qr[G][CPL], acc[G][CPL], m[G], l[G];
  start_state<G, CPL>(q, q_type, g, d, lane * CPL, scale, qr, acc, m, l);
  for (int64_t j = begin + warp; j < end; j += kWarps) {
    const int64_t row = rows[first + j];
    float kr[CPL], vr[CPL];
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int ch = lane * CPL + c;
      kr[c] = ch < d ? widen(k_pool[row * d + ch]) : 0.f;
      vr[c] = ch < d ? widen(v_pool[row * d + ch]) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < G; ++i) {
      if (i >= g) break;
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < CPL; ++c) s += qr[i][c] * kr[c];
      s = warp_sum(s);
      if (scores && lane == 0) scores[int64_t(i) * n + j] = s;
      const float m_new = fmaxf(m[i], s);
      const float old = rescale(m[i], m_new), p = __expf(s - m_new);
      l[i] = l[i] * old + p;
#pragma unroll
      for (int c = 0; c < CPL; ++c) acc[i][c] = acc[i][c] * old + p * vr[c];
      m[i] = m_new;
    }
  }
  store_split<G, CPL>(m, l, acc, warp_acc, warp_m, warp_l, lane * CPL, g, d, part_acc, part_ml);
}

// The largest of x over the block (every thread gets it); `scratch` holds kWarps floats.
__device__ float block_max(float x, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float top = scratch[0];
  for (int w = 1; w < kWarps; ++w) top = fmaxf(top, scratch[w]);
  __syncthreads();  // scratch may be reused
  return top;
}

// grid (units, g), kWarps warps: out[unit*g + i, :] from the unit's splits. The splits' weights
// exp(m_s - max) go to shared memory once, then each thread sums its channels over the splits
// (independent, coalesced loads: a thread walking the splits one dependent step at a time made
// this pass cost more than the attention itself at 66 splits).
__global__ void merge_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                             void* __restrict__ out, kernels::KvElement out_type,
                             const int64_t* __restrict__ indptr, float* __restrict__ probs,
                             int splits, int g, int d) {
  extern __shared__ float weight[];  // [splits]
  __shared__ float scratch[kWarps];
  const int unit = blockIdx.x, i = blockIdx.y;
  auto ml = [&](int s) { return part_ml + ((int64_t(unit) * splits + s) * g + i) * 2; };
  float top = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) top = fmaxf(top, ml(s)[0]);
  top = block_max(top, scratch);
  for (int s = threadIdx.x; s < splits; s += blockDim.x) weight[s] = rescale(ml(s)[0], top);
  __syncthreads();
  float sum = 0.f;
  for (int s = 0; s < splits; ++s) sum += ml(s)[1] * weight[s];
  for (int ch = threadIdx.x; ch < d; ch += blockDim.x) {
    float value = 0.f;
    for (int s = 0; s < splits; ++s)
      value += part_acc[((int64_t(unit) * splits + s) * g + i) * d + ch] * weight[s];
    store_element(out, out_type, (int64_t(unit) * g + i) * d + ch, sum > 0.f ? value / sum : 0.f);
  }
  if (probs) {  // the raw scores pass 1 wrote, normalised by the unit's max and sum
    const int64_t n = indptr[unit + 1] - indptr[unit];
    float* p = probs + int64_t(g) * indptr[unit] + int64_t(i) * n;
    // expf, not the faster __expf: the probabilities feed H2O's and KV-Compress's rankings,
    // where a less exact value moves near-ties away from the CPU's.
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) p[j] = expf(p[j] - top) / sum;
  }
}

// The arguments of one call, passed down the template dispatch.
struct Call {
  const void* q;
  kernels::KvElement q_type;  // q's and out's
  const void *k_pool, *v_pool;
  const int64_t *indptr, *rows;
  int64_t row_list_stride;
  void* out;
  float* probs;  // null, or [g * nnz]
  int64_t units, g, d;
  float scale;
  int64_t splits;
  float* workspace;
  cudaStream_t stream;
  DecodeRegisters registers = DecodeRegisters::kAsCompiled;
};

// The workspace's partials: acc [units, splits, g, d], then (m, l) [units, splits, g, 2].
float* partial_ml(const Call& c) { return c.workspace + c.units * c.splits * c.g * c.d; }

void merge(const Call& c) {
  const size_t shared = size_t(c.splits) * sizeof(float);
  merge_kernel<<<dim3(unsigned(c.units), unsigned(c.g)), kWarps * 32, shared, c.stream>>>(
      c.workspace, partial_ml(c), c.out, c.q_type, c.indptr, c.probs, int(c.splits), int(c.g),
      int(c.d));
}

// What a pass-1 dispatch does with the kernel it picks: launch it, or say how many of its
// blocks stay resident on one SM (registers, shared memory and threads allowing).
enum class Pass1 { kLaunch, kBlocksPerSm };

// Blocks of `kernel` resident on one SM with `shared` bytes of dynamic shared memory each.
// 1 if the query fails (its error cleared, so that the next launch's check does not report it).
template <typename Kernel>
int blocks_per_sm(Kernel kernel, size_t shared) {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kWarps * 32, shared) !=
      cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  return std::max(blocks, 1);
}

// Lets `kernel` take `bytes` of dynamic shared memory (beyond the default 48 KiB, static
// arrays included). False if refused (the error cleared; the launch then reports it).
template <typename Kernel>
bool allow_shared(Kernel kernel, size_t bytes) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) ==
      cudaSuccess)
    return true;
  cudaGetLastError();
  return false;
}

// `compute()` (>= 0) once per device: the CUDA runtime keeps a kernel's shared-memory opt-in,
// and so its occupancy, per device, and a process may use several. `cache`: one per quantity.
constexpr int kMaxDevices = 64;
using PerDevice = std::array<std::atomic<int>, kMaxDevices>;  // value + 1; 0: not yet known
template <typename Compute>
int once_per_device(PerDevice& cache, Compute compute) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return compute();
  }
  int known = cache[size_t(device)].load(std::memory_order_relaxed);
  if (known == 0) {
    known = compute() + 1;
    cache[size_t(device)].store(known, std::memory_order_relaxed);
  }
  return known - 1;
}

// Launch<T, W, G>::act(c, what) starts a pass-1 kernel or counts its resident blocks; W:
// channels per lane (Scalar) or lanes per row (Vector). The count is taken once per kernel,
// with the shared memory of its largest call (G query heads of its widest d): never more
// blocks than fit.
template <typename T, int CPL, int G>
struct Scalar {
  static int act(const Call& c, Pass1 what) {
    if (what == Pass1::kBlocksPerSm) {
      static PerDevice blocks;
      return once_per_device(blocks, [] {
        return blocks_per_sm(scalar_split_kernel<T, CPL, G>,
                             size_t(kWarps * G * 32 * CPL) * sizeof(float));
      });
    }
    const size_t shared = size_t(kWarps * c.g * c.d) * sizeof(float);
    scalar_split_kernel<T, CPL, G>
        <<<dim3(unsigned(c.splits), unsigned(c.units)), kWarps * 32, shared, c.stream>>>(
            c.q, c.q_type, static_cast<const T*>(c.k_pool), static_cast<const T*>(c.v_pool), c.indptr,
            c.rows, c.row_list_stride, c.workspace, partial_ml(c), c.probs, int(c.g), int(c.d),
            c.scale);
    return 0;
  }
};
template <typename T, int LPR, int G, int kMinBlocks>
int vector_act(const Call& c, Pass1 what) {
  // Its ring is 48 KiB, beyond the default limit with the static arrays: opted in once on
  // each device (before its occupancy is asked).
  static PerDevice opted_in, blocks;
  once_per_device(opted_in, [] {
    return allow_shared(vector_split_kernel<T, LPR, G, kMinBlocks>, kVectorSharedBytes) ? 1 : 0;
  });
  if (what == Pass1::kBlocksPerSm)
    return once_per_device(blocks, [] {
      return blocks_per_sm(vector_split_kernel<T, LPR, G, kMinBlocks>, kVectorSharedBytes);
    });
  vector_split_kernel<T, LPR, G, kMinBlocks>
      <<<dim3(unsigned(c.splits), unsigned(c.units)), kWarps * 32, kVectorSharedBytes, c.stream>>>(
          c.q, c.q_type, static_cast<const T*>(c.k_pool), static_cast<const T*>(c.v_pool), c.indptr,
          c.rows, c.row_list_stride, c.workspace, partial_ml(c), c.probs, int(c.g), c.scale);
  return 0;
}
template <typename T, int LPR, int G>
struct Vector {
  static int act(const Call& c, Pass1 what) {
    // The capped instance only for the shape it is timed on (16-bit d = 128, 3-4 query heads).
    if constexpr (sizeof(T) == 2 && LPR == 16 && G == 4)
      if (c.registers == DecodeRegisters::kFourBlocksPerSm) return vector_act<T, LPR, G, 4>(c, what);
    return vector_act<T, LPR, G, 1>(c, what);
  }
};

// G: the group size rounded up to 1, 2, 4 or 8 (register arrays need it at compile time).
template <template <typename, int, int> class Launch, typename T, int W>
int for_group(const Call& c, Pass1 what) {
  if (c.g <= 1) return Launch<T, W, 1>::act(c, what);
  if (c.g <= 2) return Launch<T, W, 2>::act(c, what);
  if (c.g <= 4) return Launch<T, W, 4>::act(c, what);
  return Launch<T, W, 8>::act(c, what);
}

// Lanes a row takes in vector_split_kernel, or 0 where it cannot run.
template <typename T>
int vector_lanes(const Call& c) {
  const bool aligned = reinterpret_cast<uintptr_t>(c.k_pool) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(c.v_pool) % 16 == 0;
  return vector_row_lanes(c.d * int64_t(sizeof(T)), aligned);
}

// The pass-1 kernel for c's element type T, row width and group size (vector where it can).
template <typename T>
int pass1(const Call& c, Pass1 what) {
  int result = 0;
  if (launch_with_vector_lanes(vector_lanes<T>(c), [&](auto lanes) {
        result = for_group<Vector, T, decltype(lanes)::value>(c, what);
      }))
    return result;
  const int64_t per_lane = (c.d + 31) / 32;
  if (per_lane <= 1) return for_group<Scalar, T, 1>(c, what);
  if (per_lane <= 2) return for_group<Scalar, T, 2>(c, what);
  if (per_lane <= 4) return for_group<Scalar, T, 4>(c, what);
  return for_group<Scalar, T, 8>(c, what);
}

int pass1(const Call& c, kernels::KvElement type, Pass1 what) {
  switch (type) {
    case kernels::KvElement::kF32: return pass1<float>(c, what);
    case kernels::KvElement::kBF16: return pass1<__nv_bfloat16>(c, what);
    case kernels::KvElement::kF16: return pass1<__half>(c, what);
  }
  return 0;
}

int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();  // cleared: the next launch's check would report it
    return 1;
  }
  return std::max(count, 1);
}

}  // namespace

bool decode_attention_supported(int64_t g, int64_t d) {
  return g >= 1 && g <= kMaxGroup && d >= 1 && d <= 32 * kMaxChannelsPerLane;
}

int64_t decode_attention_splits(kernels::KvElement type, const void* k_pool, const void* v_pool,
                                int64_t units, int64_t g, int64_t d, int64_t longest,
                                DecodeRegisters registers) {
  // As many blocks as the GPU holds at once (one wave: a second, partly filled wave would
  // double the time of a step whose blocks all take the same time), but no split of fewer
  // than kRowsPerSplit rows.
  static PerDevice sm_counts;
  const int sms = once_per_device(sm_counts, multiprocessors);
  Call c;
  c.k_pool = k_pool, c.v_pool = v_pool, c.g = g, c.d = d, c.registers = registers;
  const int64_t resident = int64_t(pass1(c, type, Pass1::kBlocksPerSm)) * sms;
  const int64_t to_fill = resident / std::max<int64_t>(units, 1);
  const int64_t worth = (longest + kRowsPerSplit - 1) / kRowsPerSplit;
  return std::max<int64_t>(1, std::min(to_fill, worth));
}

int64_t decode_attention_workspace_floats(int64_t units, int64_t g, int64_t d, int64_t splits) {
  return units * splits * g * (d + 2);
}

void sparse_decode_attention(const void* q, kernels::KvElement q_type, const void* k_pool,
                             const void* v_pool, kernels::KvElement type, const int64_t* indptr,
                             const int64_t* rows, int64_t row_list_stride, void* out,
                             float* probs, int64_t units, int64_t g, int64_t d, float scale,
                             int64_t splits, float* workspace, void* stream,
                             DecodeRegisters registers) {
  if (!decode_attention_supported(g, d))
    throw std::invalid_argument("sparse_decode_attention: g = " + std::to_string(g) +
                                ", d = " + std::to_string(d) + " (needs g <= 8, d <= 256)");
  if (units == 0) return;
  Call call;  // (nvcc's C++17 has no designated initialisers)
  call.q = q, call.q_type = q_type, call.k_pool = k_pool, call.v_pool = v_pool, call.indptr = indptr, call.rows = rows;
  call.row_list_stride = row_list_stride;
  call.out = out, call.probs = probs, call.units = units, call.g = g, call.d = d, call.scale = scale;
  call.splits = splits, call.workspace = workspace, call.stream = as_stream(stream);
  call.registers = registers;
  pass1(call, type, Pass1::kLaunch);
  merge(call);
}

}  // namespace kvb::cuda
