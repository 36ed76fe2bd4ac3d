#include "harness/engine/kernel_adapter.h"

#include <stdexcept>
#include <string>

#include "kernels/decode_attention.h"
#include "kernels/pq_scoring.h"
#include "kernels/quest_scoring.h"

namespace kvb {

bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                const at::Tensor& v_pool) {
  auto ok = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.dim() == 2;
  };
  return ok(q) && ok(k_pool) && ok(v_pool) && k_pool.is_contiguous() && v_pool.is_contiguous() &&
         k_pool.size(1) == q.size(1) && v_pool.size(1) == q.size(1);
}

at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale,
                                   std::vector<at::Tensor>* probs) {
  if (!sparse_attention_supported(q, k_pool, v_pool))
    throw std::logic_error("sparse_decode_attention: needs fp32 CPU tensors q [Hq, d] and "
                           "contiguous pools [rows, d]");
  const int64_t Hq = q.size(0), d = q.size(1), units = indptr.size(0) - 1;
  if (units <= 0 || Hq % units != 0)
    throw std::logic_error("sparse_decode_attention: " + std::to_string(Hq) +
                           " query heads over " + std::to_string(units) + " units");
  const int64_t g = Hq / units;
  at::Tensor offsets = indptr.to(at::kCPU, at::kLong).contiguous();
  at::Tensor row_ids = rows.to(at::kCPU, at::kLong).contiguous();
  const int64_t* off = offsets.data_ptr<int64_t>();
  at::Tensor qc = q.contiguous();
  at::Tensor out = at::empty({Hq, d}, q.options());
  at::Tensor probs_buffer;
  if (probs) probs_buffer = at::empty({g * off[units]}, q.options());
  kernels::sparse_decode_attention(qc.data_ptr<float>(), k_pool.data_ptr<float>(),
                                   v_pool.data_ptr<float>(), off, row_ids.data_ptr<int64_t>(),
                                   out.data_ptr<float>(), Hq, units, d, float(scale),
                                   probs ? probs_buffer.data_ptr<float>() : nullptr);
  if (probs) {
    probs->clear();
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n = off[u + 1] - off[u];
      probs->push_back(probs_buffer.narrow(0, g * off[u], g * n).view({g, n}));
    }
  }
  return out;
}

bool quest_page_scores_supported(const at::Tensor& kmin, const at::Tensor& kmax) {
  auto ok = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.dim() == 3 &&
           t.stride(2) == 1 && (t.size(1) <= 1 || t.stride(1) == t.size(2)) &&
           t.stride(0) >= t.size(1) * t.size(2);
  };
  return ok(kmin) && ok(kmax) && kmin.sizes() == kmax.sizes() &&
         kmin.stride(0) == kmax.stride(0);
}

at::Tensor quest_page_scores_kernel(const at::Tensor& q, const at::Tensor& kmin,
                                    const at::Tensor& kmax, bool sum_group) {
  if (!quest_page_scores_supported(kmin, kmax))
    throw std::logic_error("quest_page_scores_kernel: needs fp32 CPU page summaries [H, P, d] "
                           "with pages d floats apart");
  const int64_t H = kmin.size(0), P = kmin.size(1), d = kmin.size(2);
  if (q.dim() != 3 || q.size(0) != H || q.size(2) != d)
    throw std::logic_error("quest_page_scores_kernel: q must be [H, g, d] matching the summaries");
  const int64_t g = q.size(1);
  at::Tensor qc = q.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({H, sum_group ? 1 : g, P}, at::kFloat);
  if (P > 0 && H > 0)
    kernels::quest_page_scores(qc.data_ptr<float>(), kmin.data_ptr<float>(),
                               kmax.data_ptr<float>(), out.data_ptr<float>(), H, g, P, d,
                               kmin.stride(0), sum_group);
  return out;
}

bool pq_scores_supported(const at::Tensor& centroids) {
  return centroids.scalar_type() == at::kFloat && centroids.device().is_cpu() &&
         centroids.dim() == 4 && centroids.size(2) <= 256;
}

at::Tensor pq_scores_kernel(const at::Tensor& q, const at::Tensor& centroids,
                            const at::Tensor& codes) {
  if (!pq_scores_supported(centroids))
    throw std::logic_error("pq_scores_kernel: needs fp32 CPU centroids [H, m, K, s], K <= 256");
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3);
  if (q.dim() != 3 || q.size(0) != H || q.size(2) != m * s || codes.dim() != 3 ||
      codes.size(0) != H || codes.size(1) != m)
    throw std::logic_error("pq_scores_kernel: q [H, g, m*s] / codes [H, m, n] do not match the "
                           "centroids");
  const int64_t g = q.size(1), n = codes.size(2);
  at::Tensor qc = q.to(at::kFloat).contiguous();
  at::Tensor cc = centroids.contiguous();
  at::Tensor codes8 = codes.to(at::kByte).contiguous();
  at::Tensor out = at::empty({H, g, n}, at::kFloat);
  if (H > 0 && g > 0 && n > 0)
    kernels::pq_scores(qc.data_ptr<float>(), cc.data_ptr<float>(), codes8.data_ptr<uint8_t>(),
                       out.data_ptr<float>(), H, g, m, K, s, n);
  return out;
}

}  // namespace kvb
