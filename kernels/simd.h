// Runtime ISA dispatch for the hot loops, without build flags: a body written once as an
// always-inline template is instantiated in a default function and in one compiled for
// AVX2+FMA (+F16C, the fp16 loads: every AVX2 CPU has it), the decode kernel also in one for
// AVX-512F; the widest the CPU has is chosen at run time (GCC/Clang).
#pragma once

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define KVB_X86_DISPATCH 1
#define KVB_INLINE inline __attribute__((always_inline))
#define KVB_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KVB_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#else
#define KVB_X86_DISPATCH 0
#define KVB_INLINE inline
#define KVB_TARGET_AVX2
#define KVB_TARGET_AVX512
#endif

namespace kvb::kernels {

// The widest instruction set the kernels may use. The CPU decides; tests lower it to check every
// path on one machine (set it while no kernel runs).
enum class SimdLevel { kPortable, kAvx2, kAvx512 };
inline SimdLevel& simd_limit() {
  static SimdLevel limit = SimdLevel::kAvx512;
  return limit;
}

inline bool cpu_has_avx2_fma() {
#if KVB_X86_DISPATCH
  // F16C by CPUID: Clang before 16 has no "f16c" for __builtin_cpu_supports.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  return has && simd_limit() >= SimdLevel::kAvx2;
#else
  return false;
#endif
}

// AVX-512F on top of the AVX2 set (the OS saving the zmm state is part of the check).
inline bool cpu_has_avx512f() {
#if KVB_X86_DISPATCH
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && cpu_has_avx2_fma() && simd_limit() >= SimdLevel::kAvx512;
#else
  return false;
#endif
}

// How the decode kernels prefetch K/V rows on this CPU (kernels/kv_prefetch.h has the
// measurements behind each): fp32 rows in two levels on Intel's cores, where PREFETCHT1 stops
// at L2; on other CPUs with AVX-512 (AMD's from Zen 4; measured on Zen 5) non-temporally,
// spread over the AVX-512 kernel's phases (kSpreadNta; kernels without those phases prefetch
// into L1 8 rows ahead there); into L1 16 rows ahead elsewhere (AMD's earlier cores fill L1
// with T1 as with T0).
enum class RowPrefetch { kTwoLevels, kSpreadNta, kL1 };
inline RowPrefetch cpu_row_prefetch() {
#if KVB_X86_DISPATCH
  static const RowPrefetch plan = __builtin_cpu_is("intel")           ? RowPrefetch::kTwoLevels
                                  : __builtin_cpu_supports("avx512f") ? RowPrefetch::kSpreadNta
                                                                      : RowPrefetch::kL1;
  return plan;
#else
  return RowPrefetch::kL1;
#endif
}

}  // namespace kvb::kernels
