// One warp's 16x8x16 tensor-core product and 8x8 shared-memory matrix loads, with the register
// layouts PTX documents (PTX ISA: "Matrix Fragments for mma.m16n8k16", "ldmatrix"), so that a
// kernel may compute on a fragment's elements (nvcuda::wmma leaves that layout undocumented).
// With lane = 4 * group + t (group 0..7, t 0..3), a 32-bit register holds two 16-bit elements,
// the lower column in its low half:
//   A [16 x 16] (row-major): a[0] = A[group][2t, 2t+1], a[1] = A[group + 8][2t, 2t+1],
//                            a[2] = A[group][2t+8, 2t+9], a[3] = A[group + 8][2t+8, 2t+9]
//   B [16 x 8]:              b[0] = B[2t, 2t+1][group], b[1] = B[2t+8, 2t+9][group]
//   C, D [16 x 8] (fp32):    c[0], c[1] = C[group][2t, 2t+1], c[2], c[3] = C[group + 8][2t, 2t+1]
// All 32 lanes must call each function (warp operations). Needs sm_80 (bf16) or later.
// Under the CUDA emulation (tests/cuda_emulation) the same functions come from its header.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/element_cast.cuh"

#if defined(__CUDACC__)
namespace kvb::cuda {

// d = a b + c in fp32 over 16-bit a and b of T (__nv_bfloat16 or __half).
template <typename T>
__device__ inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                    const uint32_t (&b)[2], const float (&c)[4]) {
  static_assert(sizeof(T) == 2, "16-bit inputs");
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// Four 8x8 matrices of 16-bit elements from shared memory: lanes 8i..8i+7 give the addresses
// of matrix i's rows (16 bytes each, 16-byte aligned); r[i] = M_i[group][2t, 2t+1], or with
// `trans` the transpose's, M_i[2t, 2t+1][group]. A memory clobber: never moved across the
// waits and barriers that make the rows it reads land.
template <bool kTrans>
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

}  // namespace kvb::cuda
#else
#include <kvb_emu_warp_mma.h>  // tests/cuda_emulation/include: the same, on the CPU
#endif

namespace kvb::cuda {

// Two floats as one register of T's pair (lo in the low half), each rounded to nearest even.
template <typename T>
__device__ inline uint32_t pack_pair(float lo, float hi) {
  const T pair[2] = {narrow_to<T>(lo), narrow_to<T>(hi)};
  uint32_t bits;
  memcpy(&bits, pair, sizeof(bits));
  return bits;
}

}  // namespace kvb::cuda
