// Quest page scoring (https://arxiv.org/abs/2406.10774): the upper bound
// sum_c max(q_c * kmax_c, q_c * kmin_c) of q.k over each page's keys. fp32, framework-free.
#pragma once
#include <cstdint>

namespace kvb::kernels {

//   q:          [H, g, d]  (g query heads per KV head)
//   kmin, kmax: [H, P, d]  pages d floats apart, heads head_stride floats apart (>= P*d)
//   scores:     [H, g, P], or [H, P] summed over the group when sum_group
void quest_page_scores(const float* q, const float* kmin, const float* kmax, float* scores,
                       int64_t H, int64_t g, int64_t P, int64_t d, int64_t head_stride,
                       bool sum_group);

}  // namespace kvb::kernels
