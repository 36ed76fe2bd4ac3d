// Checks a PQCache selection (engine/kernel_adapter.h pq_top_k's layout, from any device and
// path) against ATen's composition on the CPU. Used by the CPU tests (pqcache_test.cpp) and the
// GPU ones (tests/gpu/device_parity_test.cpp).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "engine/kernel_adapter.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::test {

inline std::vector<int64_t> as_longs(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// "" when `got` is what pq_top_k(q, centroids, codes, scale, k, lead, trailing, kAten) returns
// up to near ties (top_k_difference: weights, here ATen's softmax of its scores in double,
// within 1e-5 of the k-th) and, of the tokens of one head with equal codes (whose weights are
// equal on every path), takes the earlier ones first; else what differs.
inline std::string pq_selection_difference(const at::Tensor& got, const at::Tensor& q,
                                           const at::Tensor& centroids, const at::Tensor& codes,
                                           double scale, int64_t k, int64_t lead,
                                           int64_t trailing) {
  const at::Tensor qc = q.cpu(), cc = centroids.cpu(), codes_cpu = codes.cpu();
  const int64_t H = codes.size(0), m = codes.size(1), n = codes.size(2);
  const at::Tensor weights =
      at::softmax(pq_scores(qc, cc, codes_cpu, scale, KernelPath::kAten).to(at::kDouble), -1)
          .sum(1)
          .contiguous();  // [H, n]
  const std::vector<double> w(weights.data_ptr<double>(), weights.data_ptr<double>() + H * n);
  const std::vector<int64_t> taken = as_longs(got);
  const std::string near_ties = top_k_difference(
      taken, as_longs(pq_top_k(qc, cc, codes_cpu, scale, k, lead, trailing, KernelPath::kAten)),
      w, H, n, lead, k, trailing, 1e-5);
  if (!near_ties.empty()) return near_ties;
  return equal_codes_taken_earliest(taken, as_longs(codes_cpu), H, m, n, n, lead, k, trailing);
}

}  // namespace kvb::test
