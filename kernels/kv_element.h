// The element types of K/V pools the decode-attention kernels read (CPU and CUDA alike), with
// the 16-bit formats' conversions to fp32. Framework-free.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvb::kernels {

// 16-bit K/V elements, as stored (bit patterns).
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

// bf16 is the top half of an fp32.
inline float bf16_to_float(bf16 x) {
  const uint32_t bits = uint32_t(x.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// fp32 to bf16, rounded to nearest even as LibTorch rounds (a NaN stays a quiet NaN).
inline bf16 float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {uint16_t(0x7fc0u)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return {uint16_t(bits >> 16)};
}

// IEEE half to float, subnormals, infinities and NaN included.
inline float f16_to_float(f16 x) {
  const uint32_t sign = uint32_t(x.bits & 0x8000u) << 16;
  uint32_t exponent = (x.bits >> 10) & 0x1fu, mantissa = x.bits & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // 127 - 15 = 112
  } else if (mantissa == 0) {
    bits = sign;  // zero
  } else {  // subnormal: normalise
    exponent = 113;
    while (!(mantissa & 0x400u)) mantissa <<= 1, --exponent;
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// Float to IEEE half, rounded to nearest even: overflow to infinity, subnormals, NaN kept
// quiet (its sign kept).
inline f16 float_to_f16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {uint16_t(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x477ff000u) return {uint16_t(sign | 0x7c00u)};  // rounds past 65504
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(magnitude >> 23);  // 14 + 23 - 10 + (113 - exponent) - 1
    if (shift > 24) return {sign};
    const uint32_t kept = mantissa >> shift, rest = mantissa & ((1u << shift) - 1u),
                   half_way = 1u << (shift - 1);
    const uint32_t rounded = kept + (rest > half_way || (rest == half_way && (kept & 1u)));
    return {uint16_t(sign | rounded)};
  }
  const uint32_t rebased = magnitude - 0x38000000u;  // exponent 127 -> 15
  const uint32_t rounded = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  return {uint16_t(sign | rounded)};
}

enum class KvElement { kF32, kBF16, kF16 };

// The element types of the CPU kernels that compute in fp32 and store in the model's dtype:
// widen to fp32, narrow back rounded to nearest even.
inline float widen(float x) { return x; }
inline float widen(bf16 x) { return bf16_to_float(x); }
inline float widen(f16 x) { return f16_to_float(x); }
template <typename T>
T narrow_to(float x);
template <>
inline float narrow_to<float>(float x) {
  return x;
}
template <>
inline bf16 narrow_to<bf16>(float x) {
  return float_to_bf16(x);
}
template <>
inline f16 narrow_to<f16>(float x) {
  return float_to_f16(x);
}

}  // namespace kvb::kernels
