// PyramidKV's per-layer capacities (Cai et al. 2024, https://arxiv.org/abs/2406.02069).
#pragma once
#include <cstdint>
#include <vector>

namespace kvb {

// Scored keys kept per layer (the last `window` prompt positions come on top), with the
// reference's integer arithmetic: base = B - W; min = base / beta; max = 2*base - min; if
// max >= L - W then max = L - W and min = 2*base - max; steps = (max - min) / (layers - 1);
// cap_l = max - l*steps. Uniform `base` when L < 2*base (the reference's SnapKV fallback) or
// when there is a single layer (the reference divides by zero there).
// Example: 32 layers, B=128, W=8, L large -> 234, 227, ..., 17.
std::vector<int64_t> pyramid_capacities(int64_t budget, int64_t window, int64_t prompt_length,
                                        int num_layers, int beta);

}  // namespace kvb
