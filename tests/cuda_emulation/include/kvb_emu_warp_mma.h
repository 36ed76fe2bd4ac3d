// kernels/cuda/warp_mma.cuh's tensor-core product and shared-memory matrix loads on the CPU,
// for the emulation only (tests/cuda_emulation/README.md): the register layouts PTX documents
// for mma.m16n8k16 and ldmatrix, so that a kernel that places an element in the wrong lane or
// register computes a wrong result here too. Each is a warp operation: every lane hands in its
// registers (or row address), then computes its own outputs from the whole warp's. A product's
// sums run over k in order, in fp32, over the inputs widened (a GPU's tensor cores round
// differently in the last bits).
#pragma once
#include <cstdint>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "kernels/cuda/element_cast.cuh"

namespace kvb::cuda {
namespace emu_mma {

// Every lane's 64 bits; fails the launch unless the whole warp takes part (PTX's .aligned:
// a lane that returned would otherwise leave stale bits in the product).
inline void exchange_all(uint64_t mine, uint64_t (&all)[32]) {
  unsigned taking_part = 0;
  kvb_emu::warp_exchange(mine, kvb_emu::lane(), all, &taking_part);
  kvb_emu::require(taking_part == 0xffffffffu,
                   "mma.m16n8k16 / ldmatrix: a lane of the warp did not take part");
}
template <typename T>
float half_of(uint32_t reg, int which) {  // element `which` (0: low half) of a register
  T e[2];
  std::memcpy(e, &reg, sizeof(reg));
  return widen(e[which]);
}

}  // namespace emu_mma

template <typename T>
inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                         const float (&c)[4]) {
  static_assert(sizeof(T) == 2, "16-bit inputs");
  uint64_t a01[32], a23[32], bs[32];
  emu_mma::exchange_all(uint64_t(a[0]) | uint64_t(a[1]) << 32, a01);
  emu_mma::exchange_all(uint64_t(a[2]) | uint64_t(a[3]) << 32, a23);
  emu_mma::exchange_all(uint64_t(b[0]) | uint64_t(b[1]) << 32, bs);
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane / 4, t = lane % 4;
    const uint32_t reg[4] = {uint32_t(a01[lane]), uint32_t(a01[lane] >> 32), uint32_t(a23[lane]),
                             uint32_t(a23[lane] >> 32)};
    for (int e = 0; e < 2; ++e) {
      A[group][2 * t + e] = emu_mma::half_of<T>(reg[0], e);
      A[group + 8][2 * t + e] = emu_mma::half_of<T>(reg[1], e);
      A[group][2 * t + 8 + e] = emu_mma::half_of<T>(reg[2], e);
      A[group + 8][2 * t + 8 + e] = emu_mma::half_of<T>(reg[3], e);
      B[2 * t + e][group] = emu_mma::half_of<T>(uint32_t(bs[lane]), e);
      B[2 * t + 8 + e][group] = emu_mma::half_of<T>(uint32_t(bs[lane] >> 32), e);
    }
  }
  const int group = kvb_emu::lane() / 4, t = kvb_emu::lane() % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = group + (i / 2) * 8, col = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    out[i] = sum;
  }
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

template <bool kTrans>
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  kvb_emu::require_multiple(reinterpret_cast<uintptr_t>(row), 16, "ldmatrix: a row's address");
  kvb_emu::warp_reads_shared(row, 16, "ldmatrix");
  uint64_t rows[32];
  emu_mma::exchange_all(reinterpret_cast<uintptr_t>(row), rows);
  const int group = kvb_emu::lane() / 4, t = kvb_emu::lane() % 4;
  auto element = [&](int matrix, int i, int j) {  // M_matrix[i][j], 16 bits
    uint16_t bits;
    std::memcpy(&bits, reinterpret_cast<const char*>(rows[8 * matrix + i]) + 2 * j, 2);
    return uint32_t(bits);
  };
  for (int m = 0; m < 4; ++m)
    r[m] = kTrans ? element(m, 2 * t, group) | element(m, 2 * t + 1, group) << 16
                  : element(m, group, 2 * t) | element(m, group, 2 * t + 1) << 16;
}

}  // namespace kvb::cuda
