// Runtime ISA dispatch for the hot loops, without build flags: a body written once as an
// always-inline template is instantiated in a default function and in one compiled for
// AVX2+FMA (+F16C, the fp16 loads: every AVX2 CPU has it), the decode kernel also in one for
// AVX-512F; the widest the CPU has is chosen at run time (GCC/Clang), but AVX2 on Zen 4
// (default_simd_limit).
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

// AMD's family 19h with AVX-512: Zen 4 (Zen 3, the same family, has none). GCC 12 has no
// __builtin_cpu_is("znver4"), hence CPUID.
inline bool cpu_is_amd_zen4() {
#if KVB_X86_DISPATCH
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xf;
  const unsigned family = base == 0xf ? base + ((eax >> 20) & 0xff) : base;
  return family == 0x19 && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

enum class SimdLevel { kPortable, kAvx2, kAvx512 };

// AVX-512 where the CPU has it, but not on Zen 4, whose cores run a zmm operation as two ymm
// halves: there the AVX2 decode kernel read from memory faster (dense 32k in fp32 8.33-8.90 ms
// against 9.53-10.6, every row of a bf16 pool 5.49-5.87 against 5.97-7.31; three alternate
// rounds, 2-core EPYC VM, 2026-12-01) though from cache it was 7-11% slower
// (`dense_decode_cached`).
inline SimdLevel default_simd_limit() {
  return cpu_is_amd_zen4() ? SimdLevel::kAvx2 : SimdLevel::kAvx512;
}

// The widest instruction set the kernels may use, default_simd_limit() unless set; tests set
// it to check every path the CPU has on one machine (set it while no kernel runs).
inline SimdLevel& simd_limit() {
  static SimdLevel limit = default_simd_limit();
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

// How the decode kernels prefetch K/V rows of `element_bytes` an element on this CPU
// (kernels/kv_prefetch.h has the measurements behind each): in two levels on Zen 4 and for fp32
// rows on Intel's cores, where PREFETCHT1 stops at L2; on other CPUs with AVX-512 (measured on
// Zen 5) non-temporally, spread over the AVX-512 kernel's phases (kSpreadNta; kernels without
// those phases prefetch into L1 8 rows ahead there); into L1 16 rows ahead elsewhere (AMD's
// earlier cores fill L1 with T1 as with T0; Intel's 16-bit rows).
enum class RowPrefetch { kTwoLevels, kSpreadNta, kL1 };
inline RowPrefetch cpu_row_prefetch(int element_bytes) {
#if KVB_X86_DISPATCH
  static const bool intel = __builtin_cpu_is("intel"), zen4 = cpu_is_amd_zen4(),
                    avx512 = __builtin_cpu_supports("avx512f");
  if (intel) return element_bytes == 4 ? RowPrefetch::kTwoLevels : RowPrefetch::kL1;
  if (zen4) return RowPrefetch::kTwoLevels;
  return avx512 ? RowPrefetch::kSpreadNta : RowPrefetch::kL1;
#else
  (void)element_bytes;
  return RowPrefetch::kL1;
#endif
}

}  // namespace kvb::kernels
