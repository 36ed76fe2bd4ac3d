// Ada-SnapKV's per-head capacities (Feng et al. 2024, https://arxiv.org/abs/2407.11550).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvb {

// Per head (a row of `scores`), how many scored keys to keep (the last `window` positions come
// on top). scores: [H, L - W]. B' = B - W; floor = int(B' * alpha); c_h = how many of the top
// H*B' flattened scores lie in head h; cap_h = round(c_h * (1 - alpha) + floor), half to even
// as torch.round. With `normalize` (KVCache-Factory's AdaKV), each head's scores are first
// multiplied by the share of its score mass in its own top B' (sum of its B' largest / sum of
// all), so heads whose attention is concentrated weigh more in the flattened top-k.
std::vector<int64_t> ada_head_capacities(const at::Tensor& scores, int64_t budget,
                                         int64_t window, double alpha, bool normalize = false);

}  // namespace kvb
