// Row-wise top-k: the k largest values of each row, in descending order, ties to the lowest
// index (NaN ranks below every number). fp32, framework-free.
#pragma once
#include <cstdint>

namespace kvb::kernels {

//   x: [R, n] (rows row_stride floats apart), idx: [R, k], values (optional): [R, k]. k <= n.
void topk_rows(const float* x, int64_t R, int64_t n, int64_t row_stride, int64_t k,
               int64_t* idx, float* values = nullptr);

}  // namespace kvb::kernels
