// Paged sparse GQA decode attention, flash-decoding style (kvbench_cuda.h has the contract).
//
// Pass 1, grid (splits, units), kWarps warps per block: split s of unit u takes a contiguous
// share of the unit's row list, and the group's g query heads are served from one read of each
// K/V row (online softmax: running max m, sum l, accumulator per query head in registers).
// Three kernels do pass 1:
//  - mma_split_kernel (DecodeKernel::kTensorCores, the default where it applies: 16-bit K/V of
//    d = 128, q of their type): q k^T and p v as tensor-core products, the unit's query heads
//    as the rows of a 16-row tile (its comment says more);
//  - vector_split_kernel, where a row is a power-of-two number (<= 32) of 16-byte vectors and
//    the pools are 16-byte aligned (Llama's d = 128 in bf16: 16 lanes a row): a warp copies
//    kRowsInFlight rows per lane group an iteration into shared memory (cp.async), kStages - 1
//    iterations ahead of the one it computes, because a decode step is bound by how many bytes
//    are in flight, not by arithmetic; scores are reduced over the row's lanes, the softmax is
//    updated once per tile of rows;
//  - scalar_split_kernel otherwise (odd head dims): one row per warp at a time, lane l holding
//    channels [l*CPL, l*CPL + CPL).
// All three merge their warps in shared memory into one partial (m, l, acc) per (unit, split,
// query head) in the workspace and, when probabilities are asked for, write each row's raw
// score.
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
#include "kernels/cuda/warp_mma.cuh"
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

// The end of pass 1, after a __syncthreads: the block's warps' states in shared memory
// (warp_acc [kWarps, g, d], warp_m and warp_l [kWarps][g]) merged into the split's partial.
__device__ void merge_warps(const float* warp_acc, const float (*warp_m)[kMaxGroup],
                            const float (*warp_l)[kMaxGroup], int g, int d, float* part_acc,
                            float* part_ml) {
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

// The end of the CUDA-core pass 1: each warp's state (lane 0..: channels [c0, c0 + C) of every
// query head) goes to shared memory, then the block's warps are merged.
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
  merge_warps(warp_acc, warp_m, warp_l, g, d, part_acc, part_ml);
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
// TB/s of the H100's 3. It takes 158 registers for Llama's shape on sm_90 (3 blocks an SM);
// capped at 128 for 4 blocks it was slower on an H200 (66.6 against 63.3 us at 32k, 2026-11-30).
template <typename T, int LPR, int G>
__global__ void __launch_bounds__(kWarps * 32)
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

// The tensor-core pass 1 (DecodeKernel::kTensorCores): K and V of 16-bit T with d = D, q of the
// same type. A warp takes 16 rows a tile. Its copies of K and V land in its ring of kMmaStages
// tiles (cp.async, kMmaStages - 1 tiles ahead, as the vector kernel's), chunk c of row r at
// c ^ (r % 8) so that the 8 rows of a matrix load hit 8 different bank groups. 3 stages are 96
// KiB a block at d = 128, 2 blocks an SM: on an H200 a hair faster than 2 stages with 3 blocks
// (44.4 against 44.6 us at 32k, 135.1 against 137.3 at 128k, 2026-11-30). With the unit's
// query heads as the rows of a 16-row product (head i in row i, rows g..15 zero: the tensor
// cores' waste is free beside the bytes read), s = q k^T is 2 x D/16 products of
// warp_mma.cuh, the online softmax runs on the lanes holding each (head, row) score, and p v
// is D/8 products with p rounded to T, as FlashAttention rounds it. Where the CUDA-core kernel
// spends about 600 warp instructions on 8 rows (the g heads' dot products reduced over 16
// lanes, the softmax repeated on every lane), this one spends about 150 on 16.
constexpr int kMmaTileRows = 16;
constexpr int kMmaStages = 3;
template <int D>
constexpr size_t mma_shared_bytes() {  // the rings: [kWarps, kMmaStages, 2 (K, V), 16, D] of T
  return size_t(kWarps) * kMmaStages * 2 * kMmaTileRows * D * 2;
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32)
    mma_split_kernel(const T* __restrict__ q, const T* __restrict__ k_pool,
                     const T* __restrict__ v_pool, const int64_t* __restrict__ indptr,
                     const int64_t* __restrict__ rows, int64_t row_list_stride,
                     float* __restrict__ part_acc, float* __restrict__ part_ml,
                     float* __restrict__ probs, int g, float scale) {
  static_assert(sizeof(T) == 2 && D % 64 == 0 && D <= 256, "16-bit rows of 8 to 32 chunks");
  constexpr int kChunks = D * 2 / 16;               // 16-byte chunks a row
  constexpr int kElements = 16 / 2;                 // elements a chunk
  constexpr int kRowsPerCopy = 32 / kChunks;        // rows one warp-wide copy covers
  constexpr int kCopies = kMmaTileRows / kRowsPerCopy;  // a lane's copies a tile, of K and of V
  constexpr int kSteps = D / 16;                    // the 16-channel steps of q k^T
  constexpr int kColumnTiles = D / 8;               // the 8-channel tiles of p v
  extern __shared__ uint4 ring[];  // mma_shared_bytes<D>(); after the loop the accumulators
  __shared__ float warp_m[kWarps][kMaxGroup], warp_l[kWarps][kMaxGroup];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int head = lane / 4, t = lane % 4;  // the fragments' row (query head) and column pair
  const SplitRows split = split_rows(indptr, row_list_stride);
  const int64_t first = split.first, begin = split.begin, end = split.end, n = split.n;
  float* const scores = unit_scores(probs, indptr, g);
  // q's A fragments, registers 0 and 2 (rows `head`; registers 1 and 3, rows 8..15, are zero):
  // channels 16 kk + 2t, +1 and 16 kk + 8 + 2t, +1 of query head `head` (zero past g).
  uint32_t qa[kSteps][2];
  const T* const q_head = q + (int64_t(blockIdx.y) * g + min(head, g - 1)) * D;
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t pair = 0;
      if (head < g) memcpy(&pair, q_head + 16 * kk + 8 * half + 2 * t, sizeof(pair));
      qa[kk][half] = pair;
    }
  float acc[kColumnTiles][2] = {};  // head `head`'s channels 8 nt + 2t, +1
  float m = -INFINITY, l = 0.f;     // l: this lane's rows only until the end
  constexpr int64_t kStride = int64_t(kWarps) * kMmaTileRows;  // rows between a warp's tiles
  const int64_t start = begin + int64_t(warp) * kMmaTileRows;  // the warp's first tile
  const int iterations = start < end ? int((end - start + kStride - 1) / kStride) : 0;
  uint4* const warp_ring = ring + size_t(warp) * kMmaStages * 2 * kMmaTileRows * kChunks;
  auto tile = [warp_ring](int it, int kv) {  // tile it's K (kv 0) or V (kv 1) slot
    return warp_ring + (size_t(it % kMmaStages) * 2 + kv) * kMmaTileRows * kChunks;
  };
  auto at = [](uint4* slot, int r, int c) { return slot + r * kChunks + (c ^ (r % 8)); };
  // This lane copies chunk `chunk` of the tile's rows copy_row + kRowsPerCopy * i.
  const int chunk = lane % kChunks, copy_row = lane / kChunks;
  int64_t row[kCopies];  // their pool rows (-1: past the end) for the next tile to start
  auto read_row_ids = [&](int it) {
    const int64_t base = start + int64_t(it) * kStride;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int64_t j = base + copy_row + kRowsPerCopy * i;
      row[i] = it < iterations && j < end ? rows[first + j] : -1;
    }
  };
  // One commit group a tile, empty past the last (see start_copies in vector_split_kernel);
  // rows past the end zero-filled, never read: a zero v times a zero p, not garbage times 0.
  auto start_copies = [&](int it) {
    if (it < iterations)
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int r = copy_row + kRowsPerCopy * i;
        const int64_t offset = (row[i] < 0 ? 0 : row[i]) * D + chunk * kElements;
        const size_t zeros = row[i] < 0 ? sizeof(uint4) : 0;
        __pipeline_memcpy_async(at(tile(it, 0), r, chunk), k_pool + offset, sizeof(uint4), zeros);
        __pipeline_memcpy_async(at(tile(it, 1), r, chunk), v_pool + offset, sizeof(uint4), zeros);
      }
    __pipeline_commit();
  };
  read_row_ids(0);
  for (int it = 0; it < kMmaStages - 1; ++it) {
    start_copies(it);
    read_row_ids(it + 1);
  }
  for (int it = 0; it < iterations; ++it) {
    __syncwarp();  // every lane done with tile it - 1, whose slot the next copies take
    start_copies(it + kMmaStages - 1);
    read_row_ids(it + kMmaStages);
    __pipeline_wait_prior(kMmaStages - 1);  // this lane's copies of tile it
    __syncwarp();                           // and every other lane's, for the matrix loads
    uint4* const k_tile = tile(it, 0);
    uint4* const v_tile = tile(it, 1);
    // s[j]: q k^T of the tile's rows 8j + 2t, +1 (registers 0, 1; 2, 3 are the zero rows').
    float s[2][4] = {};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int kk = 0; kk < kSteps; kk += 2) {
        uint32_t b[4];  // B fragments of steps kk and kk + 1: rows 8j.., chunks 2kk..2kk+3
        ldmatrix_x4<false>(b, at(k_tile, 8 * j + lane % 8, 2 * kk + lane / 8));
        mma_m16n8k16<T>(s[j], {qa[kk][0], 0u, qa[kk][1], 0u}, {b[0], b[1]}, s[j]);
        mma_m16n8k16<T>(s[j], {qa[kk + 1][0], 0u, qa[kk + 1][1], 0u}, {b[2], b[3]}, s[j]);
      }
    // Scaled scores (rows past the end -inf), the running max over the quad's 16 rows.
    const int64_t base = start + int64_t(it) * kStride;
    float p[2][2], top = m;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t r = base + 8 * j + 2 * t + e;
        p[j][e] = r < end ? s[j][e] * scale : -INFINITY;
        top = fmaxf(top, p[j][e]);
        if (scores && r < end && head < g) scores[int64_t(head) * n + r] = p[j][e];
      }
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    const float old = rescale(m, top);
    m = top, l *= old;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        p[j][e] = p[j][e] == -INFINITY ? 0.f : __expf(p[j][e] - top);
        l += p[j][e];
      }
    // p as the A fragment of p v (k: the tile's rows), then D/8 products into acc.
    const uint32_t pa[4] = {pack_pair<T>(p[0][0], p[0][1]), 0u, pack_pair<T>(p[1][0], p[1][1]),
                            0u};
#pragma unroll
    for (int nt = 0; nt < kColumnTiles; nt += 2) {
      uint32_t b[4];  // transposed: B fragments of channel tiles nt and nt + 1
      ldmatrix_x4<true>(b, at(v_tile, (lane / 8 % 2) * 8 + lane % 8, nt + lane / 16));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float o[4] = {acc[nt + h][0] * old, acc[nt + h][1] * old, 0.f, 0.f};
        mma_m16n8k16<T>(o, pa, {b[2 * h], b[2 * h + 1]}, o);
        acc[nt + h][0] = o[0], acc[nt + h][1] = o[1];
      }
    }
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);  // the quad's rows
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  __pipeline_wait_prior(0);  // the trailing empty groups
  __syncthreads();           // every warp done with its ring before it holds accumulators
  float* const warp_acc = reinterpret_cast<float*>(ring);  // [kWarps, g, D]
  if (head < g) {
    if (t == 0) warp_m[warp][head] = m, warp_l[warp][head] = l;
#pragma unroll
    for (int nt = 0; nt < kColumnTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) warp_acc[(warp * g + head) * D + 8 * nt + 2 * t + e] = acc[nt][e];
  }
  __syncthreads();
  merge_warps(warp_acc, warp_m, warp_l, g, D, part_acc, part_ml);
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
  DecodeKernel kernel = DecodeKernel::kTensorCores;
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
// A pass-1 kernel whose dynamic shared memory (`bytes`) may pass the default 48 KiB with its
// static arrays: opted in to it once on each device, before its occupancy is asked. With
// kBlocksPerSm its resident blocks an SM (asked once per device); else -1, and the caller
// launches it. `cache`: the kernel instance's own.
struct SharedOptIn {
  PerDevice opted_in, blocks;
};
template <typename Kernel>
int opt_in_shared(Kernel kernel, size_t bytes, SharedOptIn& cache, Pass1 what) {
  once_per_device(cache.opted_in, [&] { return allow_shared(kernel, bytes) ? 1 : 0; });
  if (what == Pass1::kBlocksPerSm)
    return once_per_device(cache.blocks, [&] { return blocks_per_sm(kernel, bytes); });
  return -1;
}

template <typename T, int LPR, int G>
struct Vector {
  static int act(const Call& c, Pass1 what) {
    static SharedOptIn cache;  // its ring is 48 KiB
    if (const int blocks =
            opt_in_shared(vector_split_kernel<T, LPR, G>, kVectorSharedBytes, cache, what);
        blocks >= 0)
      return blocks;
    vector_split_kernel<T, LPR, G><<<dim3(unsigned(c.splits), unsigned(c.units)), kWarps * 32,
                                     kVectorSharedBytes, c.stream>>>(
        c.q, c.q_type, static_cast<const T*>(c.k_pool), static_cast<const T*>(c.v_pool),
        c.indptr, c.rows, c.row_list_stride, c.workspace, partial_ml(c), c.probs, int(c.g),
        c.scale);
    return 0;
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

// The tensor-core pass 1 for 16-bit T and d = D (mma_split_kernel), as Vector::act.
template <typename T, int D>
int mma_act(const Call& c, Pass1 what) {
  constexpr size_t kShared = mma_shared_bytes<D>();
  static SharedOptIn cache;  // its rings are 96 KiB at d = 128
  if (const int blocks = opt_in_shared(mma_split_kernel<T, D>, kShared, cache, what); blocks >= 0)
    return blocks;
  mma_split_kernel<T, D>
      <<<dim3(unsigned(c.splits), unsigned(c.units)), kWarps * 32, kShared, c.stream>>>(
          static_cast<const T*>(c.q), static_cast<const T*>(c.k_pool),
          static_cast<const T*>(c.v_pool), c.indptr, c.rows, c.row_list_stride, c.workspace,
          partial_ml(c), c.probs, int(c.g), c.scale);
  return 0;
}

// Whether c runs on the tensor cores: asked for, 16-bit K/V with d = 128 (the one instance),
// q of the same type, the pools 16-byte aligned.
bool on_tensor_cores(const Call& c, kernels::KvElement type) {
  return c.kernel == DecodeKernel::kTensorCores && type != kernels::KvElement::kF32 &&
         c.q_type == type && c.d == 128 && reinterpret_cast<uintptr_t>(c.k_pool) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(c.v_pool) % 16 == 0;
}

// The pass-1 kernel for c's element type T, row width and group size: the tensor cores'
// where they apply, else the vector kernel where it can run, else the scalar one.
template <typename T>
int pass1(const Call& c, kernels::KvElement type, Pass1 what) {
  if constexpr (sizeof(T) == 2)
    if (on_tensor_cores(c, type)) return mma_act<T, 128>(c, what);
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
    case kernels::KvElement::kF32: return pass1<float>(c, type, what);
    case kernels::KvElement::kBF16: return pass1<__nv_bfloat16>(c, type, what);
    case kernels::KvElement::kF16: return pass1<__half>(c, type, what);
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

bool decode_attention_on_tensor_cores(kernels::KvElement q_type, kernels::KvElement type,
                                      const void* k_pool, const void* v_pool, int64_t d,
                                      DecodeKernel kernel) {
  Call c;
  c.q_type = q_type, c.k_pool = k_pool, c.v_pool = v_pool, c.d = d, c.kernel = kernel;
  return on_tensor_cores(c, type);
}

int64_t decode_attention_splits(kernels::KvElement q_type, kernels::KvElement type,
                                const void* k_pool, const void* v_pool, int64_t units, int64_t g,
                                int64_t d, int64_t longest, DecodeKernel kernel) {
  // As many blocks as the GPU holds at once (one wave: a second, partly filled wave would
  // double the time of a step whose blocks all take the same time), but no split of fewer
  // than kRowsPerSplit rows.
  static PerDevice sm_counts;
  const int sms = once_per_device(sm_counts, multiprocessors);
  Call c;
  c.q_type = q_type, c.k_pool = k_pool, c.v_pool = v_pool, c.g = g, c.d = d, c.kernel = kernel;
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
                             DecodeKernel kernel) {
  if (!decode_attention_supported(g, d))
    throw std::invalid_argument("sparse_decode_attention: g = " + std::to_string(g) +
                                ", d = " + std::to_string(d) + " (needs g <= 8, d <= 256)");
  if (units == 0) return;
  Call call;  // (nvcc's C++17 has no designated initialisers)
  call.q = q, call.q_type = q_type, call.k_pool = k_pool, call.v_pool = v_pool, call.indptr = indptr, call.rows = rows;
  call.row_list_stride = row_list_stride;
  call.out = out, call.probs = probs, call.units = units, call.g = g, call.d = d, call.scale = scale;
  call.splits = splits, call.workspace = workspace, call.stream = as_stream(stream);
  call.kernel = kernel;
  pass1(call, type, Pass1::kLaunch);
  merge(call);
}

}  // namespace kvb::cuda
