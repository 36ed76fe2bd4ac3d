// Runtime ISA dispatch for the hot loops, without build flags: a body written once as an
// always-inline template is instantiated in a default function and in one compiled for
// AVX2+FMA (+F16C, the fp16 loads: every AVX2 CPU has it); the latter is chosen once when the
// CPU has all three (GCC/Clang).
#pragma once

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define KVB_X86_DISPATCH 1
#define KVB_INLINE inline __attribute__((always_inline))
#define KVB_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define KVB_X86_DISPATCH 0
#define KVB_INLINE inline
#define KVB_TARGET_AVX2
#endif

namespace kvb::kernels {

inline bool cpu_has_avx2_fma() {
#if KVB_X86_DISPATCH
  // F16C by CPUID: Clang before 16 has no "f16c" for __builtin_cpu_supports.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  return has;
#else
  return false;
#endif
}

}  // namespace kvb::kernels
