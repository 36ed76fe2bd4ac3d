// LibTorch glue for the CUDA kernels: at::Tensor (CUDA, fp32, contiguous) -> raw device
// pointers on the current stream. Compiles ONLY against a CUDA build of LibTorch
// (ATen/cuda/CUDAContext.h); it is not part of any target here (the CPU LibTorch in this image
// lacks those headers). With a CUDA LibTorch, add it to kvbench_cuda and link torch_cuda.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {

// q: [H, g, d], kmin/kmax: [H, P, d] -> [H, P] (summed over the group).
at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == at::kFloat, "quest_page_scores: fp32 CUDA tensors");
  at::Tensor qc = q.contiguous(), lo = kmin.contiguous(), hi = kmax.contiguous();
  const int64_t H = q.size(0), g = q.size(1), d = q.size(2), P = kmin.size(1);
  at::Tensor out = at::empty({H, P}, q.options());
  quest_page_scores(qc.data_ptr<float>(), lo.data_ptr<float>(), hi.data_ptr<float>(),
                    out.data_ptr<float>(), H, g, P, d, P * d, true,
                    at::cuda::getCurrentCUDAStream().stream());
  return out;
}

// keys: [H, n, d], centroids: [H, C, d] -> (labels [H, n] int32, new centroids [H, C, d]).
std::pair<at::Tensor, at::Tensor> clusterkv_lloyd_step(const at::Tensor& keys, const at::Tensor& centroids) {
  TORCH_CHECK(keys.is_cuda() && keys.scalar_type() == at::kFloat, "clusterkv_lloyd_step: fp32 CUDA");
  at::Tensor k = keys.contiguous(), c = centroids.contiguous();
  const int64_t H = k.size(0), n = k.size(1), d = k.size(2), C = c.size(1);
  at::Tensor labels = at::empty({H, n}, k.options().dtype(at::kInt));
  at::Tensor counts = at::empty({H, C}, k.options().dtype(at::kInt));
  at::Tensor out = at::empty_like(c);
  void* stream = at::cuda::getCurrentCUDAStream().stream();
  cosine_assign(k.data_ptr<float>(), c.data_ptr<float>(), labels.data_ptr<int32_t>(), H, n, C, d, stream);
  centroid_update(k.data_ptr<float>(), labels.data_ptr<int32_t>(), c.data_ptr<float>(),
                  out.data_ptr<float>(), H, n, C, d, counts.data_ptr<int32_t>(), stream);
  return {labels, out};
}

// q: [H, g, m*s], centroids: [H, m, K, s], codes: [H, m, n] uint8 -> [H, g, n].
at::Tensor pq_scores(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes) {
  TORCH_CHECK(q.is_cuda() && codes.scalar_type() == at::kByte, "pq_scores: CUDA, uint8 codes");
  at::Tensor qc = q.contiguous(), cc = centroids.contiguous(), cd = codes.contiguous();
  const int64_t H = cc.size(0), m = cc.size(1), K = cc.size(2), s = cc.size(3), g = qc.size(1), n = cd.size(2);
  at::Tensor out = at::empty({H, g, n}, q.options());
  pq_scores(qc.data_ptr<float>(), cc.data_ptr<float>(), cd.data_ptr<uint8_t>(), out.data_ptr<float>(),
            H, g, m, K, s, n, at::cuda::getCurrentCUDAStream().stream());
  return out;
}

}  // namespace kvb::cuda
