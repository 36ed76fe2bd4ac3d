// Paged sparse GQA decode attention, flash-decoding style (kvbench_cuda.h has the contract).
//
// Pass 1, grid (splits, units), kWarps warps per block: split s of unit u takes a contiguous
// share of the unit's row list; each warp streams every kWarps-th of those rows once, lane l
// holding channels [l*CPL, l*CPL + CPL) of K and V, and serves all g query heads of the group
// from that one read (online softmax: running max m, sum l, accumulator per query head in
// registers). The block's warps are merged in shared memory into one partial (m, l, acc) per
// (unit, split, query head) in the workspace.
// Pass 2, grid (units): the splits of each unit merged by their log-sum-exp weights.
// Empty units (no rows) give zeros, as the engine's gathered path does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;           // query heads per unit
constexpr int kMaxChannelsPerLane = 8;  // d <= 256
constexpr int kRowsPerSplit = 64;       // the least rows worth a block of its own

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__half x) { return __half2float(x); }

__device__ inline float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// exp(a - b) for a running max a that may still be -inf (no row seen): 0, never NaN.
__device__ inline float rescale(float a, float b) { return a == -INFINITY ? 0.f : __expf(a - b); }

// G: the group size rounded up to 1, 2, 4 or 8, so the per-query-head state stays in registers.
template <typename T, int CPL, int G>
__global__ void split_kernel(const float* __restrict__ q, const T* __restrict__ k_pool,
                             const T* __restrict__ v_pool, const int64_t* __restrict__ indptr,
                             const int64_t* __restrict__ rows, float* __restrict__ part_acc,
                             float* __restrict__ part_ml, int g, int d, float scale) {
  extern __shared__ float warp_acc[];  // [kWarps, g, d]
  __shared__ float warp_m[kWarps][kMaxGroup], warp_l[kWarps][kMaxGroup];
  const int unit = blockIdx.y, split = blockIdx.x, splits = gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t first = indptr[unit], n = indptr[unit + 1] - first;
  const int64_t share = (n + splits - 1) / splits;
  const int64_t begin = min(n, int64_t(split) * share), end = min(n, begin + share);

  float qr[G][CPL], acc[G][CPL], m[G], l[G];
#pragma unroll
  for (int i = 0; i < G; ++i) {
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int ch = lane * CPL + c;
      qr[i][c] = ch < d && i < g ? q[(int64_t(unit) * g + i) * d + ch] * scale : 0.f;
      acc[i][c] = 0.f;
    }
    m[i] = -INFINITY;
    l[i] = 0.f;
  }
  for (int64_t j = begin + warp; j < end; j += kWarps) {
    const int64_t row = rows[first + j];
    float kr[CPL], vr[CPL];
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int ch = lane * CPL + c;
      kr[c] = ch < d ? to_float(k_pool[row * d + ch]) : 0.f;
      vr[c] = ch < d ? to_float(v_pool[row * d + ch]) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < G; ++i) {
      if (i >= g) break;
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < CPL; ++c) s += qr[i][c] * kr[c];
      s = warp_sum(s);
      const float m_new = fmaxf(m[i], s);
      const float old = rescale(m[i], m_new), p = __expf(s - m_new);
      l[i] = l[i] * old + p;
#pragma unroll
      for (int c = 0; c < CPL; ++c) acc[i][c] = acc[i][c] * old + p * vr[c];
      m[i] = m_new;
    }
  }
#pragma unroll
  for (int i = 0; i < G; ++i) {
    if (i >= g) break;
    if (lane == 0) warp_m[warp][i] = m[i], warp_l[warp][i] = l[i];
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int ch = lane * CPL + c;
      if (ch < d) warp_acc[(warp * g + i) * d + ch] = acc[i][c];
    }
  }
  __syncthreads();
  const int64_t part = int64_t(unit) * splits + split;
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

// grid (units): out[unit*g + i, ch] from the unit's splits.
__global__ void merge_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                             float* __restrict__ out, int splits, int g, int d) {
  const int unit = blockIdx.x;
  for (int x = threadIdx.x; x < g * d; x += blockDim.x) {
    const int i = x / d;
    float top = -INFINITY;
    for (int s = 0; s < splits; ++s)
      top = fmaxf(top, part_ml[((int64_t(unit) * splits + s) * g + i) * 2]);
    float sum = 0.f, value = 0.f;
    for (int s = 0; s < splits; ++s) {
      const int64_t part = int64_t(unit) * splits + s;
      const float weight = rescale(part_ml[(part * g + i) * 2], top);
      sum += part_ml[(part * g + i) * 2 + 1] * weight;
      value += part_acc[part * g * d + x] * weight;
    }
    out[int64_t(unit) * g * d + x] = sum > 0.f ? value / sum : 0.f;
  }
}

// The arguments of one call, passed down the template dispatch.
struct Call {
  const float* q;
  const void *k_pool, *v_pool;
  const int64_t *indptr, *rows;
  float* out;
  int64_t units, g, d;
  float scale;
  int64_t splits;
  float* workspace;
  cudaStream_t stream;
};

template <typename T, int CPL, int G>
void launch(const Call& c) {
  float* part_acc = c.workspace;
  float* part_ml = c.workspace + c.units * c.splits * c.g * c.d;
  const size_t shared = size_t(kWarps * c.g * c.d) * sizeof(float);
  split_kernel<T, CPL, G>
      <<<dim3(unsigned(c.splits), unsigned(c.units)), kWarps * 32, shared, c.stream>>>(
          c.q, static_cast<const T*>(c.k_pool), static_cast<const T*>(c.v_pool), c.indptr,
          c.rows, part_acc, part_ml, int(c.g), int(c.d), c.scale);
  merge_kernel<<<unsigned(c.units), 256, 0, c.stream>>>(part_acc, part_ml, c.out, int(c.splits),
                                                       int(c.g), int(c.d));
}

template <typename T, int CPL>
void launch_for_group(const Call& c) {
  if (c.g <= 1) launch<T, CPL, 1>(c);
  else if (c.g <= 2) launch<T, CPL, 2>(c);
  else if (c.g <= 4) launch<T, CPL, 4>(c);
  else launch<T, CPL, 8>(c);
}

template <typename T>
void launch_for_width(const Call& c) {
  const int64_t per_lane = (c.d + 31) / 32;
  if (per_lane <= 1) launch_for_group<T, 1>(c);
  else if (per_lane <= 2) launch_for_group<T, 2>(c);
  else if (per_lane <= 4) launch_for_group<T, 4>(c);
  else launch_for_group<T, 8>(c);
}

int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 1;
  return std::max(count, 1);
}

}  // namespace

bool decode_attention_supported(int64_t g, int64_t d) {
  return g >= 1 && g <= kMaxGroup && d >= 1 && d <= 32 * kMaxChannelsPerLane;
}

int64_t decode_attention_splits(int64_t units, int64_t longest) {
  // Enough blocks to fill the GPU about twice, but no split of fewer than kRowsPerSplit rows.
  static const int sms = multiprocessors();
  const int64_t to_fill = (2 * int64_t(sms) + units - 1) / std::max<int64_t>(units, 1);
  const int64_t worth = (longest + kRowsPerSplit - 1) / kRowsPerSplit;
  return std::max<int64_t>(1, std::min(to_fill, worth));
}

int64_t decode_attention_workspace_floats(int64_t units, int64_t g, int64_t d, int64_t splits) {
  return units * splits * g * (d + 2);
}

void sparse_decode_attention(const float* q, const void* k_pool, const void* v_pool,
                             kernels::KvElement type, const int64_t* indptr, const int64_t* rows,
                             float* out,
                             int64_t units, int64_t g, int64_t d, float scale, int64_t splits,
                             float* workspace, void* stream) {
  if (!decode_attention_supported(g, d))
    throw std::invalid_argument("sparse_decode_attention: g = " + std::to_string(g) +
                                ", d = " + std::to_string(d) + " (needs g <= 8, d <= 256)");
  if (units == 0) return;
  Call call;  // (nvcc's C++17 has no designated initialisers)
  call.q = q, call.k_pool = k_pool, call.v_pool = v_pool, call.indptr = indptr, call.rows = rows;
  call.out = out, call.units = units, call.g = g, call.d = d, call.scale = scale;
  call.splits = splits, call.workspace = workspace, call.stream = as_stream(stream);
  switch (type) {
    case kernels::KvElement::kF32: return launch_for_width<float>(call);
    case kernels::KvElement::kBF16: return launch_for_width<__nv_bfloat16>(call);
    case kernels::KvElement::kF16: return launch_for_width<__half>(call);
  }
}

}  // namespace kvb::cuda
