// fp32 and the 16-bit element types on the device: widen to fp32, narrow back rounded to
// nearest even (as LibTorch's casts round), for kernels that compute in fp32 and store in the
// model's dtype.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/kv_element.h"

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

// Element i of an array whose type is known only at run time (a q or an output in the model's
// dtype: no cast before or after a call), widened / stored rounded as above.
__device__ inline float load_element(const void* p, kernels::KvElement type, int64_t i) {
  if (type == kernels::KvElement::kBF16) return widen(static_cast<const __nv_bfloat16*>(p)[i]);
  if (type == kernels::KvElement::kF16) return widen(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__device__ inline void store_element(void* p, kernels::KvElement type, int64_t i, float x) {
  if (type == kernels::KvElement::kBF16)
    static_cast<__nv_bfloat16*>(p)[i] = narrow_to<__nv_bfloat16>(x);
  else if (type == kernels::KvElement::kF16)
    static_cast<__half*>(p)[i] = narrow_to<__half>(x);
  else
    static_cast<float*>(p)[i] = x;
}

}  // namespace kvb::cuda
