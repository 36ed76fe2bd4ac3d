#include "kernels/top_k.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace kvb::kernels {
namespace {

// Whether score a (index i) ranks before score b (index j): the larger rank_key (NaN first,
// -0 ties +0), ties to the lower index. A strict total order on (score, index).
inline bool ranks_before(float a, int64_t i, float b, int64_t j) {
  const uint32_t ka = rank_key(a), kb = rank_key(b);
  return ka != kb ? ka > kb : i < j;
}

}  // namespace

void top_k_ascending(const float* scores, int64_t rows, int64_t n, int64_t stride, int64_t k,
                     int64_t lead, int64_t trailing, int64_t* out) {
  const int64_t width = lead + k + trailing;
#pragma omp parallel for schedule(dynamic, 1) if (rows > 1 && rows * n >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = scores + r * stride;
    int64_t* o = out + r * width;
    std::iota(o, o + lead, int64_t(0));
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    const auto before = [s](int64_t i, int64_t j) { return ranks_before(s[i], i, s[j], j); };
    if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    std::sort(order.begin(), order.begin() + k);
    for (int64_t i = 0; i < k; ++i) o[lead + i] = lead + order[size_t(i)];
    std::iota(o + lead + k, o + width, lead + n);
  }
}

}  // namespace kvb::kernels
