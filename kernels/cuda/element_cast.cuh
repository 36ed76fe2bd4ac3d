// fp32 and the 16-bit element types on the device: widen to fp32, narrow back rounded to
// nearest even (as LibTorch's casts round), for kernels that compute in fp32 and store in the
// model's dtype.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// The minimum / maximum of a and b as ATen's minimum / maximum give them: a NaN on either side
// wins (fminf / fmaxf would drop it); otherwise one of the two, a on a tie.
__device__ inline float min_keeping_nan(float a, float b) { return isnan(a) || a <= b ? a : b; }
__device__ inline float max_keeping_nan(float a, float b) { return isnan(a) || b <= a ? a : b; }

// A 16-byte vector of E = 16 / sizeof(T) elements (a lane's load), widened to floats. Its bytes
// are copied out as the element type, not read through a cast pointer: C++ (the CUDA
// emulation's compiler) may assume a uint4's bytes are never read as floats and drop the
// read; nvcc makes the copy register moves.
template <typename T, int E>
__device__ inline void unpack_vector(const uint4& raw, float (&out)[E]) {
  static_assert(E * sizeof(T) == sizeof(uint4), "E elements of T make one 16-byte vector");
  T elements[E];
  memcpy(elements, &raw, sizeof(raw));
#pragma unroll
  for (int c = 0; c < E; ++c) out[c] = widen(elements[c]);
}

// The inverse: E floats narrowed to T (rounded to nearest even) as one 16-byte vector.
template <typename T, int E>
__device__ inline uint4 pack_vector(const float (&in)[E]) {
  static_assert(E * sizeof(T) == sizeof(uint4), "E elements of T make one 16-byte vector");
  T elements[E];
#pragma unroll
  for (int c = 0; c < E; ++c) elements[c] = narrow_to<T>(in[c]);
  uint4 raw;
  memcpy(&raw, elements, sizeof(raw));
  return raw;
}

// Lanes a row of `row_bytes` takes in 16-byte vectors where a kernel's vector path can read it:
// a power of two from 2 to 32, rows 16-byte aligned (`aligned`: the caller's bases and
// strides); 0 otherwise (the scalar path).
inline int vector_row_lanes(int64_t row_bytes, bool aligned) {
  if (!aligned || row_bytes % 16 != 0) return 0;
  const int64_t lanes = row_bytes / 16;
  return lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0 ? int(lanes) : 0;
}

// For a kernel whose vector path takes its lanes a row at compile time: calls
// launch(std::integral_constant<int, lanes>{}) and returns true where `lanes` (from
// vector_row_lanes) is one of 2 .. 32; returns false at 0, for the caller's scalar path.
template <typename Launch>
bool launch_with_vector_lanes(int lanes, Launch&& launch) {
  switch (lanes) {
    case 2: launch(std::integral_constant<int, 2>{}); return true;
    case 4: launch(std::integral_constant<int, 4>{}); return true;
    case 8: launch(std::integral_constant<int, 8>{}); return true;
    case 16: launch(std::integral_constant<int, 16>{}); return true;
    case 32: launch(std::integral_constant<int, 32>{}); return true;
    default: return false;
  }
}

}  // namespace kvb::cuda
