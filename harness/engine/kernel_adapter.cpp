#include "harness/engine/kernel_adapter.h"

#include <stdexcept>
#include <string>

#include "kernels/decode_attention.h"

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
                                   const at::Tensor& v_pool,
                                   const std::vector<at::Tensor>& rows_per_head, double scale,
                                   std::vector<at::Tensor>* probs) {
  if (!sparse_attention_supported(q, k_pool, v_pool))
    throw std::logic_error("sparse_decode_attention: needs fp32 CPU tensors q [Hq, d] and "
                           "contiguous pools [rows, d]");
  const int64_t Hq = q.size(0), d = q.size(1), Hkv = int64_t(rows_per_head.size());
  if (Hkv == 0 || Hq % Hkv != 0)
    throw std::logic_error("sparse_decode_attention: " + std::to_string(Hq) +
                           " query heads over " + std::to_string(Hkv) + " KV heads");
  const int64_t g = Hq / Hkv;
  std::vector<int64_t> offsets(size_t(Hkv + 1), 0);
  for (int64_t h = 0; h < Hkv; ++h) offsets[h + 1] = offsets[h] + rows_per_head[h].numel();
  // One index buffer; a head's rows are already contiguous int64 in the common case.
  at::Tensor rows = at::empty({offsets[Hkv]}, at::kLong);
  for (int64_t h = 0; h < Hkv; ++h)
    rows.narrow(0, offsets[h], offsets[h + 1] - offsets[h])
        .copy_(rows_per_head[h].to(at::kLong).view({-1}));
  at::Tensor qc = q.contiguous();
  at::Tensor out = at::empty({Hkv, g, d}, q.options());
  at::Tensor probs_buffer;
  if (probs) probs_buffer = at::empty({g * offsets[Hkv]}, q.options());
  kernels::sparse_decode_attention(qc.data_ptr<float>(), k_pool.data_ptr<float>(),
                                   v_pool.data_ptr<float>(), offsets.data(),
                                   rows.data_ptr<int64_t>(), out.data_ptr<float>(), Hq, Hkv, d,
                                   float(scale), probs ? probs_buffer.data_ptr<float>() : nullptr);
  if (probs) {
    probs->clear();
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t n = offsets[h + 1] - offsets[h];
      probs->push_back(probs_buffer.narrow(0, g * offsets[h], g * n).view({g, n}));
    }
  }
  return out;
}

}  // namespace kvb
