// Llama's RMSNorm, one block per row (kvbench_cuda.h has the contract; kernels/rms_norm.h the
// CPU kernel of the same semantics). A decode step normalises one row of a few thousand
// elements three times a layer: the block reads it once to sum its squares and once to write,
// where ATen's composite launches 6 kernels in fp32 and 8 in bf16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/warp_sum.cuh"

namespace kvb::cuda {
namespace {

// 1024: a decode row of 4096 elements is 4 loads a thread, not 16. The row's loads are
// latency-bound, not bandwidth-bound (one block per row): with 256 threads the H100 spent
// 12.7 us a call (`kvbench generate --profile`, 2026-11-26), 65 calls a step of the 8B shape.
constexpr int kThreads = 1024;

// grid (rows), kThreads threads: the row's sum of squares in fp32 (threads, then warps, then
// the block), then out = round(round(x * r) * w). With `residual`, the row normalised is
// added = round(x + residual), written out by the first pass (each thread reads back only the
// elements it wrote). The inputs x, residual and weight are no output's memory (the glue
// allocates `added` and `out`): __restrict__ on them lets a thread's loads run ahead of its
// stores. The second pass reads `added` back with __ldcg (through L2): nvcc reads what it
// can prove read-only through the non-coherent cache, undefined for memory the kernel writes.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ residual,
                    const T* __restrict__ weight, T* added, T* out, int dim, float eps) {
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float scale;
  const int64_t first = int64_t(blockIdx.x) * dim;
  const T* row = x + first;
  T* row_out = out + first;
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    float v = widen(row[i]);
    if (residual) {
      const T rounded = narrow_to<T>(__fadd_rn(v, widen(residual[first + i])));
      added[first + i] = rounded;
      v = widen(rounded);
    }
    sum += v * v;
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    scale = 1.f / sqrtf(total / float(dim) + eps);  // correctly rounded, as 1 / std::sqrt
  }
  __syncthreads();
  const float r = scale;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    const T v = residual ? __ldcg(added + first + i) : row[i];
    row_out[i] = narrow_to<T>(widen(narrow_to<T>(widen(v) * r)) * widen(weight[i]));
  }
}

template <typename T>
void launch(const void* x, const void* residual, const void* weight, void* added, void* out,
            int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  rms_norm_kernel<T><<<unsigned(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(residual), static_cast<const T*>(weight),
      static_cast<T*>(added), static_cast<T*>(out), int(dim), eps);
}

void launch_any(const void* x, const void* residual, const void* weight, void* added, void* out,
                kernels::KvElement type, int64_t rows, int64_t dim, float eps, void* stream) {
  if (rows == 0 || dim == 0) return;
  if (rows > 0x7fffffff || dim > 0x7fffffff)
    throw std::invalid_argument("kvb::cuda::rms_norm: more than 2^31 - 1 rows or columns");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kernels::KvElement::kF32:
      return launch<float>(x, residual, weight, added, out, rows, dim, eps, s);
    case kernels::KvElement::kBF16:
      return launch<__nv_bfloat16>(x, residual, weight, added, out, rows, dim, eps, s);
    case kernels::KvElement::kF16:
      return launch<__half>(x, residual, weight, added, out, rows, dim, eps, s);
  }
}

}  // namespace

void rms_norm(const void* x, const void* weight, void* out, kernels::KvElement type,
              int64_t rows, int64_t dim, float eps, void* stream) {
  launch_any(x, nullptr, weight, nullptr, out, type, rows, dim, eps, stream);
}

void add_rms_norm(const void* x, const void* residual, const void* weight, void* sum, void* out,
                  kernels::KvElement type, int64_t rows, int64_t dim, float eps, void* stream) {
  launch_any(x, residual, weight, sum, out, type, rows, dim, eps, stream);
}

}  // namespace kvb::cuda
