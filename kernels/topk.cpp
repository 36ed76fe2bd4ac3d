#include "kernels/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvb::kernels {

void topk_rows(const float* x, int64_t R, int64_t n, int64_t row_stride, int64_t k,
               int64_t* idx, float* values) {
  if (k <= 0) return;
#pragma omp parallel for schedule(dynamic, 1) if (R > 1 && R * n >= (1 << 15))
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * row_stride;
    // NaN ranks last: compare through a key that maps NaN to -inf, ties by index.
    auto before = [row](int64_t a, int64_t b) {
      const float va = std::isnan(row[a]) ? -INFINITY : row[a];
      const float vb = std::isnan(row[b]) ? -INFINITY : row[b];
      return va > vb || (va == vb && a < b);
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    std::sort(order.begin(), order.begin() + k, before);
    for (int64_t i = 0; i < k; ++i) {
      idx[r * k + i] = order[i];
      if (values) values[r * k + i] = row[order[i]];
    }
  }
}

}  // namespace kvb::kernels
