// The sum of x over a warp's 32 lanes, every lane getting it (a butterfly of shuffles: the
// same order on every lane, so every lane holds the same bits). All 32 lanes must call it.
#pragma once

namespace kvb::cuda {

__device__ inline float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

}  // namespace kvb::cuda
