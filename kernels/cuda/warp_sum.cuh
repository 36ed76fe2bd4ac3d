// Sums over a warp's lanes by a butterfly of shuffles: the same order on every lane, so every
// lane holds the same bits. All 32 lanes must call them.
#pragma once

namespace kvb::cuda {

// The sum of x over each group of LPR consecutive lanes (a power of two up to 32), every lane
// of the group getting it.
template <int LPR>
__device__ inline float lane_group_sum(float x) {
#pragma unroll
  for (int offset = LPR / 2; offset > 0; offset >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// The sum of x over the warp's 32 lanes.
__device__ inline float warp_sum(float x) { return lane_group_sum<32>(x); }

}  // namespace kvb::cuda
