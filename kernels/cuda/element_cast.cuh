// fp32 and the 16-bit element types on the device: widen to fp32, narrow back rounded to
// nearest even (as LibTorch's casts round), for kernels that compute in fp32 and store in the
// model's dtype.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kvb::cuda {

__device__ inline float widen(float x) { return x; }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float widen(__half x) { return __half2float(x); }
template <typename T>
__device__ inline T narrow_to(float x);
template <>
__device__ inline float narrow_to<float>(float x) { return x; }
template <>
__device__ inline __nv_bfloat16 narrow_to<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ inline __half narrow_to<__half>(float x) { return __float2half_rn(x); }

}  // namespace kvb::cuda
