// Rotary embedding with rotate-half pairs, one block per (head, position) row (kvbench_cuda.h
// has the contract; kernels/rope.h the CPU kernel, the same bits). Products and the sum use
// __fmul_rn / __fadd_rn, which nvcc never fuses into a multiply-add: each is rounded apart, as
// ATen's separate kernels (a concatenation, two products, a sum) round them.
#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 128;  // Llama's head dim: a thread per channel

// a * b rounded to T, in fp32.
template <typename T>
__device__ inline float product(T a, T b) {
  return widen(narrow_to<T>(__fmul_rn(widen(a), widen(b))));
}

// grid (n * L): row = head * L + position.
template <typename T>
__global__ void rope_kernel(const T* __restrict__ x, const T* __restrict__ cos,
                            const T* __restrict__ sin, T* __restrict__ out, int L, int d, int r) {
  const int64_t row = blockIdx.x;
  const int64_t position = row % L;
  const T* in = x + row * d;
  T* o = out + row * d;
  const T* c = cos + position * r;
  const T* s = sin + position * r;
  const int half = r / 2;
  for (int i = threadIdx.x; i < d; i += kThreads) {
    if (i >= r) {
      o[i] = in[i];
      continue;
    }
    const T swapped = i < half ? in[i + half] : in[i - half];
    o[i] = narrow_to<T>(__fadd_rn(product(in[i], c[i]), product(swapped, s[i])));
  }
}

template <typename T>
void launch(const void* x, const void* cos, const void* sin, void* out, int64_t rows, int64_t L,
            int64_t d, int64_t r, cudaStream_t stream) {
  rope_kernel<T><<<unsigned(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(cos), static_cast<const T*>(sin),
      static_cast<T*>(out), int(L), int(d), int(r));
}

}  // namespace

void rope_rotate_half(const void* x, const void* cos, const void* sin, void* out,
                      kernels::KvElement type, int64_t n, int64_t L, int64_t d, int64_t r,
                      void* stream) {
  if (r <= 0 || r % 2 != 0 || r > d)
    throw std::invalid_argument("kvb::cuda::rope_rotate_half: r must be even, 0 < r <= d");
  if (n * L > 0x7fffffff || d > 0x7fffffff)
    throw std::invalid_argument("kvb::cuda::rope_rotate_half: more than 2^31 - 1 rows");
  if (n == 0 || L == 0) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t rows = n * L;
  switch (type) {
    case kernels::KvElement::kF32: launch<float>(x, cos, sin, out, rows, L, d, r, s); break;
    case kernels::KvElement::kBF16: launch<__nv_bfloat16>(x, cos, sin, out, rows, L, d, r, s); break;
    case kernels::KvElement::kF16: launch<__half>(x, cos, sin, out, rows, L, d, r, s); break;
  }
}

}  // namespace kvb::cuda
