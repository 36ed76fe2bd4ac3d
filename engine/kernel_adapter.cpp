#include "engine/kernel_adapter.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/decode_attention.h"
#include "kernels/kv_rows.h"
#include "kernels/kmeans_assign.h"
#include "kernels/pq_scoring.h"
#include "kernels/quest_scoring.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/top_k.h"
#include "kernels/top_pages.h"

#if KVBENCH_CUDA_KERNELS
#include "kernels/cuda/torch_glue.h"
#endif

namespace kvb {

at::Tensor unit_rows(const at::Tensor& x) {
  return x / x.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12);
}

namespace {

// The CPU kernel's element type for a pool dtype (none: the kernel does not read it).
std::optional<kernels::KvElement> kv_element(at::ScalarType t) {
  if (t == at::kFloat) return kernels::KvElement::kF32;
  if (t == at::kBFloat16) return kernels::KvElement::kBF16;
  if (t == at::kHalf) return kernels::KvElement::kF16;
  return std::nullopt;
}

// The CPU kernel's inputs: CPU tensors, q of a floating dtype (read as fp32), contiguous pools
// of q's width in fp32, bf16 or fp16.
bool cpu_attention_ok(const at::Tensor& q, const at::Tensor& k_pool, const at::Tensor& v_pool) {
  auto on_cpu = [](const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 2; };
  return on_cpu(q) && on_cpu(k_pool) && on_cpu(v_pool) && at::isFloatingType(q.scalar_type()) &&
         k_pool.scalar_type() == v_pool.scalar_type() && kv_element(k_pool.scalar_type()) &&
         k_pool.is_contiguous() && v_pool.is_contiguous() && k_pool.size(1) == q.size(1) &&
         v_pool.size(1) == q.size(1);
}

// The per-unit views [g, n_u] of a probabilities buffer laid out as the kernels write it: unit
// u's at g * offsets[u] (offsets: [units + 1], on the host).
std::vector<at::Tensor> probabilities_per_unit(const at::Tensor& buffer, int64_t g,
                                               const int64_t* offsets, int64_t units) {
  std::vector<at::Tensor> views;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t n = offsets[u + 1] - offsets[u];
    views.push_back(buffer.narrow(0, g * offsets[u], g * n).view({g, n}));
  }
  return views;
}

}  // namespace

bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                const at::Tensor& v_pool, int64_t units) {
  if (cpu_attention_ok(q, k_pool, v_pool)) return true;
#if KVBENCH_CUDA_KERNELS
  if (cuda::sparse_decode_attention_supported(q, k_pool, v_pool, units)) return true;
#endif
  return false;
}

at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale,
                                   std::vector<at::Tensor>* probs, int64_t longest,
                                   const std::vector<int64_t>& host_counts) {
#if KVBENCH_CUDA_KERNELS
  if (q.is_cuda()) {
    const int64_t units = indptr.size(0) - 1;
    if (!probs)
      return cuda::sparse_decode_attention(q, k_pool, v_pool, indptr, rows, scale,
                                           longest >= 0 ? longest : rows.size(-1));
    // The views need the units' offsets on the host: from host_counts, else read back.
    std::vector<int64_t> offsets(size_t(units + 1), 0);
    if (int64_t(host_counts.size()) == units) {
      std::partial_sum(host_counts.begin(), host_counts.end(), offsets.begin() + 1);
    } else {
      const at::Tensor ptr = indptr.to(at::kCPU, at::kLong).contiguous();
      std::copy(ptr.data_ptr<int64_t>(), ptr.data_ptr<int64_t>() + units + 1, offsets.begin());
    }
    at::Tensor buffer;
    at::Tensor out = cuda::sparse_decode_attention(q, k_pool, v_pool, indptr, rows, scale,
                                                   longest >= 0 ? longest : rows.size(-1),
                                                   &buffer, offsets.back());
    *probs = probabilities_per_unit(buffer, q.size(0) / units, offsets.data(), units);
    return out;
  }
#endif
  if (!cpu_attention_ok(q, k_pool, v_pool))
    throw std::logic_error("sparse_decode_attention: needs CPU tensors q [Hq, d] and contiguous "
                           "f32/bf16/f16 pools [rows, d] (or, on a CUDA build, CUDA tensors)");
  const int64_t Hq = q.size(0), d = q.size(1), units = indptr.size(0) - 1;
  if (units <= 0 || Hq % units != 0)
    throw std::logic_error("sparse_decode_attention: " + std::to_string(Hq) +
                           " query heads over " + std::to_string(units) + " units");
  const int64_t g = Hq / units;
  at::Tensor offsets = indptr.to(at::kCPU, at::kLong).contiguous();
  // Unit u's list in row u of a [units, n] table: read through its row stride (in place where
  // the table's rows are contiguous, as a block table's are).
  const bool table = rows.dim() == 2 && rows.size(0) == units;
  at::Tensor row_ids = rows.to(at::kCPU, at::kLong);
  if (!table) row_ids = row_ids.reshape({-1});
  if (row_ids.stride(-1) != 1 || (table && row_ids.stride(0) < 1)) row_ids = row_ids.contiguous();
  const int64_t* off = offsets.data_ptr<int64_t>();
  at::Tensor qc = q.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({Hq, d}, qc.options());
  at::Tensor probs_buffer;
  if (probs) probs_buffer = at::empty({g * off[units]}, qc.options());
  kernels::sparse_decode_attention(qc.data_ptr<float>(), k_pool.data_ptr(), v_pool.data_ptr(),
                                   *kv_element(k_pool.scalar_type()), off,
                                   row_ids.data_ptr<int64_t>(), out.data_ptr<float>(), Hq, units,
                                   d, float(scale),
                                   probs ? probs_buffer.data_ptr<float>() : nullptr,
                                   table ? std::max<int64_t>(row_ids.stride(0), 1) : 0);
  if (probs) *probs = probabilities_per_unit(probs_buffer, g, off, units);
  return out.to(q.scalar_type());
}

bool rms_norm_supported(const at::Tensor& x, const at::Tensor& weight) {
  if (!x.defined() || !weight.defined() || x.dim() < 1 || weight.dim() != 1 ||
      weight.size(0) != x.size(-1) || weight.scalar_type() != x.scalar_type() ||
      weight.device() != x.device() || !x.is_contiguous() || !weight.is_contiguous())
    return false;
  const at::ScalarType t = x.scalar_type();
  if (x.device().is_cpu()) return t == at::kFloat || t == at::kBFloat16;
#if KVBENCH_CUDA_KERNELS
  if (x.is_cuda()) return cuda::rms_norm_supported(x, weight);
#endif
  return false;
}

at::Tensor inference_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                              KernelPath path) {
  if (path == KernelPath::kAten || !rms_norm_supported(x, weight))
    return rms_norm(x, weight, eps);
#if KVBENCH_CUDA_KERNELS
  if (x.is_cuda()) return cuda::rms_norm(x, weight, eps);
#endif
  at::Tensor out = at::empty_like(x);
  const int64_t dim = x.size(-1);
  kernels::rms_norm(x.data_ptr(), weight.data_ptr(), out.data_ptr(), *kv_element(x.scalar_type()),
                    dim == 0 ? 0 : x.numel() / dim, dim, float(eps));
  return out;
}

AddedAndNormed inference_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                      const at::Tensor& weight, double eps, KernelPath path) {
  const bool fused = path == KernelPath::kAuto && rms_norm_supported(x, weight) &&
                     residual.device() == x.device() && residual.scalar_type() == x.scalar_type() &&
                     residual.sizes() == x.sizes() && residual.is_contiguous();
  if (!fused) {
    at::Tensor sum = x + residual;
    return {sum, inference_rms_norm(sum, weight, eps, path)};
  }
#if KVBENCH_CUDA_KERNELS
  if (x.is_cuda()) {
    auto [sum, normed] = cuda::add_rms_norm(x, residual, weight, eps);
    return {sum, normed};
  }
#endif
  at::Tensor sum = at::empty_like(x), normed = at::empty_like(x);
  const int64_t dim = x.size(-1);
  kernels::add_rms_norm(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), sum.data_ptr(),
                        normed.data_ptr(), *kv_element(x.scalar_type()),
                        dim == 0 ? 0 : x.numel() / dim, dim, float(eps));
  return {sum, normed};
}

namespace {

bool cpu_kv_rows_ok(const at::Tensor& k_pool, const at::Tensor& v_pool, const at::Tensor& rows,
                    const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&k_pool, &v_pool, &rows, &k, &v})
    if (!t->device().is_cpu() || (t != &rows && !t->is_contiguous())) return false;
  return k_pool.dim() == 2 && v_pool.sizes() == k_pool.sizes() && k.dim() == 2 &&
         v.sizes() == k.sizes() && k.size(1) == k_pool.size(1) && rows.dim() == 1 &&
         rows.size(0) == k.size(0) && rows.scalar_type() == at::kLong &&
         k_pool.scalar_type() == v_pool.scalar_type() && k.scalar_type() == k_pool.scalar_type() &&
         v.scalar_type() == k_pool.scalar_type();
}

}  // namespace

void write_kv_rows(at::Tensor& k_pool, at::Tensor& v_pool, const at::Tensor& rows,
                   const at::Tensor& k, const at::Tensor& v) {
#if KVBENCH_CUDA_KERNELS
  if (cuda::write_kv_rows_supported(k_pool, v_pool, rows, k, v))
    return cuda::write_kv_rows(k_pool, v_pool, rows, k, v);
#endif
  if (!cpu_kv_rows_ok(k_pool, v_pool, rows, k, v)) {
    k_pool.index_copy_(0, rows, k);
    v_pool.index_copy_(0, rows, v);
    return;
  }
  kernels::write_kv_rows(k_pool.data_ptr(), v_pool.data_ptr(), rows.data_ptr<int64_t>(),
                         rows.stride(0), k.data_ptr(), v.data_ptr(), k.size(0),
                         k.size(1) * int64_t(k.element_size()));
}

namespace {

bool cpu_rope_ok(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (!x.device().is_cpu() || x.dim() < 2 || cos.dim() != 2 || cos.sizes() != sin.sizes() ||
      (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16))
    return false;
  const int64_t r = cos.size(1);
  return cos.device().is_cpu() && sin.device().is_cpu() && cos.scalar_type() == x.scalar_type() &&
         sin.scalar_type() == x.scalar_type() && x.is_contiguous() && cos.is_contiguous() &&
         sin.is_contiguous() && cos.size(0) == x.size(-2) && r > 0 && r % 2 == 0 &&
         r <= x.size(-1);
}

}  // namespace

at::Tensor inference_apply_rope(const at::Tensor& x, const RopeAngles& angles) {
  if (angles.interleaved) return apply_rope(x, angles);
#if KVBENCH_CUDA_KERNELS
  if (cuda::rope_rotate_half_supported(x, angles.cos, angles.sin))
    return cuda::rope_rotate_half(x, angles.cos, angles.sin);
#endif
  if (!cpu_rope_ok(x, angles.cos, angles.sin)) return apply_rope(x, angles);
  at::Tensor out = at::empty_like(x);
  const int64_t L = x.size(-2), d = x.size(-1);
  if (x.numel() > 0)
    kernels::rope_rotate_half(x.data_ptr(), angles.cos.data_ptr(), angles.sin.data_ptr(),
                              out.data_ptr(), *kv_element(x.scalar_type()), x.numel() / (L * d),
                              L, d, angles.cos.size(1));
  return out;
}

namespace {

bool fp32_on(const at::Tensor& t, bool cuda) {
  return t.scalar_type() == at::kFloat && (cuda ? t.is_cuda() : t.device().is_cpu());
}

// The CPU kernel reads page p of head h at h * stride(0) + p * d: unit channel stride, pages
// d floats apart, one head stride for both summaries.
bool quest_cpu_layout(const at::Tensor& kmin, const at::Tensor& kmax) {
  auto ok = [](const at::Tensor& t) {
    return fp32_on(t, false) && t.dim() == 3 && t.stride(2) == 1 &&
           (t.size(1) <= 1 || t.stride(1) == t.size(2)) && t.stride(0) >= t.size(1) * t.size(2);
  };
  return ok(kmin) && ok(kmax) && kmin.sizes() == kmax.sizes() && kmin.stride(0) == kmax.stride(0);
}

at::Tensor quest_page_scores_cpu(const at::Tensor& q, const at::Tensor& kmin,
                                 const at::Tensor& kmax, bool sum_group) {
  const int64_t H = kmin.size(0), P = kmin.size(1), d = kmin.size(2), g = q.size(1);
  at::Tensor qc = q.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({H, sum_group ? 1 : g, P}, at::kFloat);
  if (P > 0 && H > 0)
    kernels::quest_page_scores(qc.data_ptr<float>(), kmin.data_ptr<float>(),
                               kmax.data_ptr<float>(), out.data_ptr<float>(), H, g, P, d,
                               kmin.stride(0), sum_group);
  return out;
}

// relu(q) . kmax + min(q, 0) . kmin: two batched matmuls.
at::Tensor quest_page_scores_aten(const at::Tensor& q, const at::Tensor& kmin,
                                  const at::Tensor& kmax, bool sum_group) {
  at::Tensor qf = q.to(at::kFloat);
  at::Tensor scores = at::bmm(qf.clamp_min(0), kmax.to(at::kFloat).transpose(1, 2)) +
                      at::bmm(qf.clamp_max(0), kmin.to(at::kFloat).transpose(1, 2));  // [H, g, P]
  return sum_group ? scores.sum(1, /*keepdim=*/true) : scores;
}

// PQ codes [H, m, n] as the CPU kernels read them: uint8 rows one stride apart (PQCache's
// leading columns of its index) in place, anything else converted.
at::Tensor codes_as_bytes(const at::Tensor& codes) {
  const bool in_place =
      codes.scalar_type() == at::kByte &&
      kernels::pq_codes_rows_in_place(codes.size(1), codes.size(2), codes.stride(0),
                                      codes.stride(1), codes.stride(2));
  return in_place ? codes : codes.to(at::kByte).contiguous();
}

at::Tensor pq_scores_cpu(const at::Tensor& q, const at::Tensor& centroids,
                         const at::Tensor& codes) {
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), g = q.size(1), n = codes.size(2);
  at::Tensor qc = q.to(at::kFloat).contiguous();
  at::Tensor cc = centroids.contiguous();
  at::Tensor codes8 = codes_as_bytes(codes);
  at::Tensor out = at::empty({H, g, n}, at::kFloat);
  if (H > 0 && g > 0 && n > 0)
    kernels::pq_scores(qc.data_ptr<float>(), cc.data_ptr<float>(), codes8.data_ptr<uint8_t>(),
                       out.data_ptr<float>(), H, g, m, K, s, n, codes8.stride(1));
  return out;
}

// The lookup table q_sub . centroids, then a gather of each code's entry, summed over m.
at::Tensor pq_scores_aten(const at::Tensor& q, const at::Tensor& centroids,
                          const at::Tensor& codes) {
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), g = q.size(1), n = codes.size(2);
  at::Tensor q_sub = q.to(at::kFloat).view({H, g, m, s}).transpose(1, 2).reshape({H * m, g, s});
  at::Tensor table = at::bmm(q_sub, centroids.to(at::kFloat).reshape({H * m, K, s}).transpose(1, 2));
  at::Tensor picked = table.view({H, m, g, K})
                          .gather(3, codes.to(at::kLong).unsqueeze(2).expand({H, m, g, n}));
  return picked.sum(1);  // [H, g, n]
}

void check_quest_shapes(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax) {
  if (q.dim() != 3 || kmin.dim() != 3 || kmin.sizes() != kmax.sizes() ||
      q.size(0) != kmin.size(0) || q.size(2) != kmin.size(2))
    throw std::logic_error("quest_page_scores: q [H, g, d] and kmin, kmax [H, P, d] do not match");
}

void check_pq_shapes(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes) {
  if (centroids.dim() != 4 || q.dim() != 3 || codes.dim() != 3 ||
      q.size(0) != centroids.size(0) || q.size(2) != centroids.size(1) * centroids.size(3) ||
      codes.size(0) != centroids.size(0) || codes.size(1) != centroids.size(1))
    throw std::logic_error("pq_scores: q [H, g, m*s] / codes [H, m, n] do not match the "
                           "centroids [H, m, K, s]");
}

// The argmax of k.c_hat is that of cos(k, c) (|k| > 0 scales a key's candidates alike), so only
// the centroids are normalised (in fp32, then cast), as in the CPU kernel. The products run in
// the keys' dtype: fp32 keys give fp32 products, bf16 keys tensor-core ones on a GPU.
// Chunks of keys keep the similarity block [H, chunk, C] under block_elements.
// The centroids [H, C, d] L2-normalised in fp32, then in the keys' dtype: what both GPU paths'
// products read.
at::Tensor normalised_centroids(const at::Tensor& centroids, at::ScalarType keys_type) {
  return unit_rows(centroids.to(at::kFloat)).to(keys_type);
}

at::Tensor cosine_assign_aten(const at::Tensor& keys, const at::Tensor& centroids,
                              int64_t block_elements) {
  const int64_t H = keys.size(0), n = keys.size(1), C = centroids.size(1);
  const at::Tensor cn = normalised_centroids(centroids, keys.scalar_type()).transpose(1, 2);  // [H, d, C]
  const int64_t chunk = cosine_assign_chunk(H, C, block_elements);
  at::Tensor labels = at::empty({H, n}, keys.options().dtype(at::kLong));
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t len = std::min(chunk, n - s);
    labels.narrow(1, s, len).copy_(at::bmm(keys.narrow(1, s, len), cn).argmax(-1));  // [H, len]
  }
  return labels;
}

at::Tensor cluster_means_aten(const at::Tensor& keys, const at::Tensor& labels,
                              const at::Tensor& old) {
  const int64_t H = keys.size(0), n = keys.size(1), d = keys.size(2), C = old.size(1);
  at::Tensor kf = keys.to(at::kFloat);
  const at::TensorOptions floats = kf.options();
  at::Tensor sums = at::zeros({H, C, d}, floats)
                        .scatter_add_(1, labels.unsqueeze(-1).expand({H, n, d}), kf);  // [H, C, d]
  at::Tensor counts = at::zeros({H, C}, floats).scatter_add_(1, labels, at::ones({H, n}, floats));
  at::Tensor means = sums / counts.clamp_min(1).unsqueeze(-1);
  return at::where((counts > 0).unsqueeze(-1), means, old.to(at::kFloat));  // [H, C, d]
}

// The CPU K-means kernels (kernels/kmeans_assign.h) on fp32 CPU tensors.
at::Tensor cosine_assign_cpu(const at::Tensor& keys, const at::Tensor& centroids) {
  const int64_t H = keys.size(0), n = keys.size(1), C = centroids.size(1), d = keys.size(2);
  at::Tensor k = keys.contiguous(), c = centroids.contiguous();
  at::Tensor labels = at::empty({H, n}, keys.options().dtype(at::kInt));  // [H, n]
  kernels::cosine_assign(k.data_ptr<float>(), c.data_ptr<float>(), labels.data_ptr<int32_t>(),
                         H, n, C, d);
  return labels.to(at::kLong);
}

at::Tensor cluster_means_cpu(const at::Tensor& keys, const at::Tensor& labels,
                             const at::Tensor& old) {
  const int64_t H = keys.size(0), n = keys.size(1), d = keys.size(2), C = old.size(1);
  at::Tensor k = keys.contiguous(), l = labels.to(at::kInt).contiguous();
  at::Tensor o = old.contiguous();
  at::Tensor out = at::empty({H, C, d}, keys.options());  // [H, C, d]
  kernels::centroid_update(k.data_ptr<float>(), l.data_ptr<int32_t>(), o.data_ptr<float>(),
                           out.data_ptr<float>(), H, n, C, d);
  return out;
}

}  // namespace

at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax,
                             bool sum_group, KernelPath path, const QuestKeyFold* fold) {
  check_quest_shapes(q, kmin, kmax);
  if (fold) {
#if KVBENCH_CUDA_KERNELS
    const cuda::QuestFoldArgs in_launch{fold->k_pool, fold->rows, fold->page, fold->fresh};
    if (path == KernelPath::kAuto && q.is_cuda() &&
        cuda::quest_fold_in_scores_supported(q, kmin, kmax, in_launch))
      return cuda::quest_page_scores(q, kmin, kmax, sum_group, &in_launch);
#endif
    at::Tensor lo = kmin, hi = kmax;  // the caller's views, folded in place
    quest_fold_key(lo, hi, fold->k_pool.index_select(0, fold->rows), fold->page, fold->fresh,
                   path);
  }
  if (path == KernelPath::kAuto && q.device().is_cpu() && quest_cpu_layout(kmin, kmax))
    return quest_page_scores_cpu(q, kmin, kmax, sum_group);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && q.is_cuda() && cuda::quest_page_scores_supported(kmin, kmax))
    return cuda::quest_page_scores(q, kmin, kmax, sum_group);
#endif
  return quest_page_scores_aten(q, kmin, kmax, sum_group);
}

void quest_fold_key(at::Tensor& kmin, at::Tensor& kmax, const at::Tensor& k, int64_t page,
                    bool fresh, KernelPath path) {
  const at::Tensor kc = k.to(kmin.scalar_type());  // [H, d]
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::quest_fold_key_supported(kmin, kmax, kc, page))
    return cuda::quest_fold_key(kmin, kmax, kc, page, fresh);
#endif
  (void)path;
  at::Tensor lo = kmin.select(1, page), hi = kmax.select(1, page);  // [H, d]
  if (fresh) {
    lo.copy_(kc);
    hi.copy_(kc);
    return;
  }
  at::minimum_out(lo, lo, kc);  // in place: one op each, not a result and a copy
  at::maximum_out(hi, hi, kc);
}

at::Tensor top_page_entries(const at::Tensor& scores, int64_t pages, int64_t whole, int64_t part,
                            int64_t page_size, int64_t n, KernelPath path) {
  // Both paths' contract, checked once (the ATen path would return other widths quietly).
  if (scores.dim() != 2 ||
      !kernels::top_pages_arguments_ok(scores.size(1), pages, whole, part, page_size, n, 0))
    throw std::logic_error(std::string("top_page_entries: needs scores [rows, P], ") +
                           kernels::kTopPagesContract);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::top_pages_supported(scores))
    return cuda::top_pages(scores, pages, whole, part, page_size, n);
#endif
  (void)path;
  const int64_t units = scores.size(0), current_first = pages * page_size;
  // [units, pages] page ids, best first
  const at::Tensor ranked =
      std::get<1>(scores.narrow(1, 0, pages).sort(/*stable=*/true, 1, /*descending=*/true));
  const at::Tensor in_page = at::arange(page_size, ranked.options());  // [page_size]
  // A page's entries: in_page + page_size x its id, one operator.
  std::vector<at::Tensor> parts;  // [units, *] logical entries
  if (whole > 0)
    parts.push_back(at::add(in_page, ranked.narrow(1, 0, whole).unsqueeze(2), page_size)
                        .reshape({units, -1}));
  if (part > 0)
    parts.push_back(at::add(in_page.narrow(0, 0, part), ranked.narrow(1, whole, 1), page_size));
  parts.push_back(at::arange(current_first, n, ranked.options()).expand({units, n - current_first}));
  return std::get<0>(at::cat(parts, 1).sort(1));
}

namespace {

// Each row's k largest scores' indices, ascending, ties at the k-th score to the lower indices
// and NaN above every number (the rule of the top_pages kernel, and of top_k_indices): ATen's
// topk gives the k-th score, not which of its ties (CPU and CUDA differ). PQCache's scores tie
// often: tokens with the same codes in every sub-space score alike.
// scores: [rows, n], 0 <= k <= n. Returns [rows, k] int64.
at::Tensor top_k_in_index_order(const at::Tensor& scores, int64_t k) {
  const int64_t rows = scores.size(0), n = scores.size(1);
  const at::TensorOptions longs = scores.options().dtype(at::kLong);
  if (k == 0 || k == n) return at::arange(k, longs).expand({rows, k}).contiguous();
  // [rows, 1]: the k-th score; [rows, n]: above it, at it (NaN above numbers, NaN ties NaN)
  const at::Tensor kth = std::get<0>(at::topk(scores, k, 1, true, true)).narrow(1, k - 1, 1);
  const at::Tensor nan = scores.isnan(), kth_nan = kth.isnan();
  const at::Tensor above = (scores > kth) | (nan & ~kth_nan);
  const at::Tensor ties = (scores == kth) | (nan & kth_nan);
  const at::Tensor room = k - above.sum(1, /*keepdim=*/true);  // [rows, 1]: ties to take
  const at::Tensor taken = above | (ties & (ties.cumsum(1) <= room));
  return taken.nonzero().select(1, 1).reshape({rows, k}).contiguous();  // ascending in each row
}

}  // namespace

at::Tensor top_k_ascending(const at::Tensor& scores, int64_t k, int64_t lead, int64_t trailing,
                           KernelPath path) {
  if (scores.dim() != 2 || k < 0 || k > scores.size(1) || lead < 0 || trailing < 0)
    throw std::logic_error("top_k_ascending: needs scores [rows, n], 0 <= k <= n, lead >= 0 "
                           "and trailing >= 0");
  const int64_t rows = scores.size(0), n = scores.size(1);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::top_pages_supported(scores))
    return cuda::top_pages(scores, n, k, 0, 1, n + trailing, lead);
#endif
  if (path == KernelPath::kAuto && fp32_on(scores, false) && scores.stride(1) == 1) {
    at::Tensor out = at::empty({rows, lead + k + trailing}, scores.options().dtype(at::kLong));
    kernels::top_k_ascending(scores.data_ptr<float>(), rows, n, scores.stride(0), k, lead,
                             trailing, out.data_ptr<int64_t>());
    return out;
  }
  const at::Tensor top = top_k_in_index_order(scores, k);  // [rows, k]
  if (lead == 0 && trailing == 0) return top;
  const at::TensorOptions longs = top.options();
  return at::cat({at::arange(lead, longs).expand({rows, lead}), top + lead,
                  at::arange(lead + n, lead + n + trailing, longs).expand({rows, trailing})},
                 1);
}

at::Tensor top_k_ascending_then_last(const at::Tensor& scores, const at::Tensor& limit,
                                     int64_t k, KernelPath path) {
  if (scores.dim() != 2 || k < 0 || k > scores.size(1) || limit.numel() != 1)
    throw std::logic_error("top_k_ascending_then_last: needs scores [rows, n], 0 <= k <= n and "
                           "one limit");
  const int64_t n = scores.size(1);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::top_pages_supported(scores) &&
      limit.scalar_type() == at::kLong && limit.device() == scores.device())
    return cuda::top_pages(scores, n, k, 0, 1, n + 1, 0, cuda::kAutoChunk, limit.reshape({}));
#endif
  (void)path;
  // The best k by descending score; past the first limit - 1, n, which sorts last: ascending,
  // each row begins with its best limit - 1 and n.
  at::Tensor best = std::get<1>(scores.topk(k, 1));  // [rows, k]
  best.masked_fill_(at::arange(1, k + 1, best.options()) >= limit, n);
  return std::get<0>(at::constant_pad_nd(best, {0, 1}, double(n)).sort(1));  // [rows, k + 1]
}

at::Tensor pq_scores(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                     double scale, KernelPath path) {
  check_pq_shapes(q, centroids, codes);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && q.is_cuda() && cuda::pq_scores_supported(centroids))
    return cuda::pq_scores(q, centroids, codes, scale);
#endif
  const bool small_codebook = centroids.size(2) <= 256;  // codes fit uint8
  const at::Tensor scores = path == KernelPath::kAuto && small_codebook &&
                                    fp32_on(centroids, false) && q.device().is_cpu()
                                ? pq_scores_cpu(q, centroids, codes)
                                : pq_scores_aten(q, centroids, codes);  // [H, g, n]
  return scale == 1.0 ? scores : scores * scale;
}

at::Tensor pq_top_k(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                    double scale, int64_t k, int64_t lead, int64_t trailing, KernelPath path) {
  check_pq_shapes(q, centroids, codes);
  if (k < 0 || k > codes.size(2) || lead < 0 || trailing < 0)
    throw std::logic_error("pq_top_k: needs 0 <= k <= n, lead >= 0 and trailing >= 0");
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && q.is_cuda() && cuda::pq_top_k_supported(q, centroids))
    return cuda::pq_top_k(q, centroids, codes, scale, k, lead, trailing);
#endif
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), g = q.size(1), n = codes.size(2);
  if (path == KernelPath::kAuto && fp32_on(centroids, false) && q.device().is_cpu() &&
      codes.device().is_cpu() && K <= 256 &&
      kernels::pq_combinations(m, K) <= kernels::kPqMaxCombinations) {
    const at::Tensor qc = q.to(at::kFloat).contiguous(), cc = centroids.contiguous();
    const at::Tensor codes8 = codes_as_bytes(codes);
    at::Tensor out = at::empty({H, lead + k + trailing}, codes.options().dtype(at::kLong));
    if (H > 0)
      kernels::pq_top_k(qc.data_ptr<float>(), cc.data_ptr<float>(), codes8.data_ptr<uint8_t>(), H,
                        g, m, K, s, n, codes8.stride(1), float(scale), k, lead, trailing,
                        out.data_ptr<int64_t>());
    return out;
  }
  const at::Tensor weights = at::softmax(pq_scores(q, centroids, codes, scale, path), -1).sum(1);
  return top_k_ascending(weights, k, lead, trailing, path);  // weights: [H, n]
}

void pq_encode_rows(const at::Tensor& centroids, const at::Tensor& k_pool, const at::Tensor& rows,
                    at::Tensor& codes, int64_t column, KernelPath path) {
  if (centroids.dim() != 4 || k_pool.dim() != 2 || rows.dim() != 2 || codes.dim() != 3)
    throw std::logic_error("pq_encode_rows: needs centroids [H, m, K, s], a pool [rows, m*s], "
                           "rows [H, n] and codes [H, m, *]");
  const int64_t H = centroids.size(0), m = centroids.size(1), s = centroids.size(3);
  const int64_t n = rows.size(1);
  if (column < 0 || column + n > codes.size(2) || rows.size(0) != H || codes.size(0) != H ||
      codes.size(1) != m || k_pool.size(1) != m * s)
    throw std::logic_error("pq_encode_rows: rows [H, n], codes [H, m, >= column + n] and the "
                           "pool [rows, m*s] do not match the centroids [H, m, K, s]");
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::pq_encode_supported(centroids, k_pool, rows, codes))
    return cuda::pq_encode(centroids, k_pool, rows, codes, column);
#endif
  (void)path;
  // x: [H, m, n, 1, s] against c: [H, m, 1, K, s]; direct differences (exact nearest).
  const at::Tensor x =
      k_pool.index({rows}).to(at::kFloat).reshape({H, n, m, s}).permute({0, 2, 1, 3}).unsqueeze(3);
  const at::Tensor dist = (x - centroids.unsqueeze(2)).pow(2).sum(-1);  // [H, m, n, K]
  codes.narrow(2, column, n).copy_(dist.argmin(-1));
}

// On a GPU, fp32 keys take ATen's: cuBLAS's fp32 bmm + argmax took 1.45 ms at 32k keys and
// 18.5 ms at 128k (8 KV heads, n / 80 centroids) where kvbench's CUDA kernel (fp32 FMAs) took
// 2.79 and 43.4 ms (H100, `gpu_cosine_assign`, 2026-11-26), so that kernel went. 16-bit keys
// take the tensor-core kernel with the argmax fused (kvbench_cuda.h cosine_assign, since
// 2026-11-29): 234 us and 3.11 ms at 32k and 128k on an H200 (2026-11-30,
// `gpu_cosine_assign_bf16`), where ATen's bf16 path, which writes and reads back every
// similarity, took 813 us and 8.00 ms in chunks of 16 Mi elements.
at::Tensor cosine_assign(const at::Tensor& keys, const at::Tensor& centroids, KernelPath path,
                         int64_t block_elements) {
  if (path == KernelPath::kAuto && fp32_on(keys, false) && fp32_on(centroids, false))
    return cosine_assign_cpu(keys, centroids);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::cosine_assign_supported(keys, centroids))
    return cuda::cosine_assign(keys, normalised_centroids(centroids, keys.scalar_type()));
#endif
  return cosine_assign_aten(keys, centroids, block_elements);
}

at::Tensor cluster_members_in_rank_order(const at::Tensor& ranked, const at::Tensor& sizes,
                                         const at::Tensor& starts, const at::Tensor& members,
                                         int64_t take) {
  const int64_t H = ranked.size(0);
  if (take < 0 || take > members.size(1))
    throw std::logic_error("cluster_members_in_rank_order: take " + std::to_string(take) +
                           " outside 0 .. " + std::to_string(members.size(1)));
  const at::Tensor ranked_sizes = sizes.gather(1, ranked);   // [H, C]
  const at::Tensor ranked_starts = starts.gather(1, ranked);
  const at::Tensor ends = ranked_sizes.cumsum(1);  // members taken after each ranked cluster
  // Slot t of the selection lies in the first ranked cluster whose end exceeds t.
  const at::Tensor slot = at::arange(take, ends.options()).expand({H, take}).contiguous();
  const at::Tensor rank = at::searchsorted(ends, slot, /*out_int32=*/false, /*right=*/true);
  const at::Tensor within = slot - (ends - ranked_sizes).gather(1, rank);
  return members.gather(1, ranked_starts.gather(1, rank) + within).to(at::kLong);  // [H, take]
}

at::Tensor cluster_rows(const at::Tensor& scores, const at::Tensor& sizes, const at::Tensor& starts,
                        const at::Tensor& members, int64_t take, int64_t sinks,
                        int64_t recent_begin, int64_t n, const ClusterCacheStep* cache,
                        KernelPath path) {
  if (take < 0 || take > members.size(1) || sinks < 0 || sinks > recent_begin || recent_begin > n)
    throw std::logic_error("cluster_rows: needs 0 <= take <= " + std::to_string(members.size(1)) +
                           " members and 0 <= sinks <= recent_begin <= n");
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && cuda::cluster_rows_supported(scores, sizes, starts, members, n)) {
    const ClusterCacheStep none;  // undefined tensors: no cache accounting
    const ClusterCacheStep& c = cache ? *cache : none;
    return cuda::cluster_rows(scores, sizes, starts, members, take, sinks, recent_begin, n,
                              c.last_selected, c.step, c.oldest_hit, c.hits);
  }
#endif
  (void)path;
  const int64_t H = members.size(0);
  const at::TensorOptions longs = members.options().dtype(at::kLong);
  std::vector<at::Tensor> parts;  // [H, *] logical entries
  if (take > 0) {
    const at::Tensor ranked = std::get<1>(scores.sort(/*stable=*/true, 1, /*descending=*/true));
    const at::Tensor clustered = cluster_members_in_rank_order(ranked, sizes, starts, members, take);
    if (cache) {  // a hit: last selected at oldest_hit or after (-1: never)
      cache->hits.add_((cache->last_selected.gather(1, clustered) >= cache->oldest_hit).sum());
      cache->last_selected.scatter_(1, clustered, cache->step);
    }
    parts.push_back(clustered);
  }
  parts.push_back(at::arange(sinks, longs).expand({H, sinks}));
  parts.push_back(at::arange(recent_begin, n, longs).expand({H, n - recent_begin}));
  return std::get<0>(at::cat(parts, 1).sort(1));
}

at::Tensor cluster_means(const at::Tensor& keys, const at::Tensor& labels, const at::Tensor& old,
                         KernelPath path) {
  if (path == KernelPath::kAuto && fp32_on(keys, false) && fp32_on(old, false) &&
      labels.device().is_cpu())
    return cluster_means_cpu(keys, labels, old);
#if KVBENCH_CUDA_KERNELS
  if (path == KernelPath::kAuto && keys.is_cuda() && labels.is_cuda() && old.is_cuda())
    return cuda::centroid_update(keys, labels, old);
#endif
  return cluster_means_aten(keys, labels, old);
}

}  // namespace kvb
