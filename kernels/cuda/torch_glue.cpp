// LibTorch glue for the CUDA kernels (declarations, shapes and dtypes: torch_glue.h): checks
// device, dtype and shape, converts and lays out, and passes raw device pointers and the
// current stream to kernels/cuda/kvbench_cuda.h.
//
// Compiled into kvbench_core only against a CUDA LibTorch (-DKVBENCH_CUDA=ON; the CMake CUDA
// block). Against a CPU LibTorch, ci/cuda_build.sh compiles it without linking (target
// kvbench_torch_glue_check: the ATen/cuda headers there plus one generated header stub).
#include "kernels/cuda/torch_glue.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/pq_scoring.h"
#include "kernels/top_pages.h"

namespace kvb::cuda {
namespace {

// The kernels' dynamic shared memory: 48 KiB, the default limit without opting in.
constexpr int64_t kSharedFloats = 48 * 1024 / 4;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("kvb::cuda::" + what);
}

// Every tensor on `like`'s CUDA device, of rank `dims`, with every size a kernel `int`.
void require_device(const char* fn, const at::Tensor& like,
                    std::initializer_list<const at::Tensor*> tensors, int64_t dims) {
  require(like.defined() && like.is_cuda(), std::string(fn) + ": needs CUDA tensors");
  for (const at::Tensor* t : tensors) {
    require(t->defined() && t->device() == like.device(),
            std::string(fn) + ": every input must be on " + like.device().str());
    require(t->dim() == dims, std::string(fn) + ": expected " + std::to_string(dims) +
                                  "-dimensional inputs, got " + std::to_string(t->dim()));
    for (int64_t size : t->sizes())
      require(size < INT_MAX, std::string(fn) + ": a dimension of " + std::to_string(size) +
                                  " exceeds the kernels' int range");
  }
  require(like.size(0) <= 65535, std::string(fn) + ": more than 65535 heads");
}

// PQ codes [H, m, n] as the kernels read them: uint8 rows one stride apart (the leading columns
// of a wider index) in place, anything else converted. (The CPU adapter's codes_as_bytes is
// its twin: this file is built only on a CUDA build, the adapter's on every build.)
at::Tensor pq_codes_as_read(const at::Tensor& codes) {
  const bool in_place =
      codes.scalar_type() == at::kByte &&
      kernels::pq_codes_rows_in_place(codes.size(1), codes.size(2), codes.stride(0),
                                      codes.stride(1), codes.stride(2));
  return in_place ? codes : codes.to(at::kByte).contiguous();
}

void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

// kmin/kmax usable in place: pages d floats apart, unit channel stride, one head stride.
bool quest_layout_ok(const at::Tensor& kmin, const at::Tensor& kmax) {
  auto ok = [](const at::Tensor& t) {
    return t.stride(2) == 1 && (t.size(1) <= 1 || t.stride(1) == t.size(2)) &&
           (t.size(0) <= 1 || t.stride(0) >= t.size(1) * t.size(2));
  };
  return ok(kmin) && ok(kmax) && kmin.stride(0) == kmax.stride(0);
}

std::optional<kernels::KvElement> kv_element(at::ScalarType t) {
  if (t == at::kFloat) return kernels::KvElement::kF32;
  if (t == at::kBFloat16) return kernels::KvElement::kBF16;
  if (t == at::kHalf) return kernels::KvElement::kF16;
  return std::nullopt;
}

}  // namespace

bool sparse_decode_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                       const at::Tensor& v_pool, int64_t units) {
  if (!q.defined() || !k_pool.defined() || !v_pool.defined() || !q.is_cuda() || units < 1 ||
      q.dim() != 2 || k_pool.dim() != 2 || v_pool.dim() != 2 || q.size(0) % units != 0)
    return false;
  return k_pool.device() == q.device() && v_pool.device() == q.device() &&
         k_pool.scalar_type() == v_pool.scalar_type() && kv_element(k_pool.scalar_type()) &&
         k_pool.is_contiguous() && v_pool.is_contiguous() && k_pool.size(1) == q.size(1) &&
         v_pool.size(1) == q.size(1) && decode_attention_supported(q.size(0) / units, q.size(1));
}

at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale, int64_t longest,
                                   at::Tensor* probs, int64_t nnz) {
  const int64_t units = indptr.defined() ? indptr.size(0) - 1 : 0;
  require(sparse_decode_attention_supported(q, k_pool, v_pool, units),
          "sparse_decode_attention: needs CUDA q [units * g, d] (g <= 8, d <= 256) and "
          "contiguous f32/bf16/f16 pools [rows, d] on its device");
  require(indptr.device() == q.device() && rows.device() == q.device() &&
              indptr.scalar_type() == at::kLong && rows.scalar_type() == at::kLong,
          "sparse_decode_attention: indptr and rows must be int64 on " + q.device().str());
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t d = q.size(1), g = q.size(0) / units;
  // q is read and out written in q's dtype where the kernel has it (the model's: f32, bf16,
  // f16), so a call is the kernel's two launches, with no cast before or after.
  const at::Tensor qc = kv_element(q.scalar_type()) ? q.contiguous() : q.to(at::kFloat).contiguous();
  const int64_t splits = decode_attention_splits(
      *kv_element(qc.scalar_type()), *kv_element(k_pool.scalar_type()), k_pool.data_ptr(),
      v_pool.data_ptr(), units, g, d, std::max<int64_t>(longest, 0));
  // [units, n] lists (unit u's in row u, maybe of a wider table) are read through their row
  // stride: in place where it is one, else from a packed copy.
  const bool table = rows.dim() == 2 && rows.size(0) == units;
  const at::Tensor row_ids =
      !table ? rows.reshape({-1}).contiguous()
             : rows.stride(1) == 1 && rows.stride(0) > 0 ? rows : rows.contiguous();
  const at::Tensor ptr = indptr.contiguous();
  at::Tensor out = at::empty({units * g, d}, qc.options());
  at::Tensor workspace = at::empty({decode_attention_workspace_floats(units, g, d, splits)},
                                   qc.options().dtype(at::kFloat));
  if (probs) {
    if (nnz < 0) nnz = ptr[units].item<int64_t>();  // waits for the device
    *probs = at::empty({g * nnz}, qc.options().dtype(at::kFloat));
  }
  cuda::sparse_decode_attention(qc.data_ptr(), *kv_element(qc.scalar_type()), k_pool.data_ptr(),
                                v_pool.data_ptr(), *kv_element(k_pool.scalar_type()),
                                ptr.data_ptr<int64_t>(), row_ids.data_ptr<int64_t>(),
                                table ? std::max<int64_t>(row_ids.stride(0), 1) : 0,
                                out.data_ptr(),
                                probs ? probs->data_ptr<float>() : nullptr, units, g, d,
                                float(scale), splits, workspace.data_ptr<float>(),
                                current_stream());
  check_launch("sparse_decode_attention");
  return out.to(q.scalar_type());  // a no-op unless q is of a dtype the kernel does not read
}

bool quest_page_scores_supported(const at::Tensor& kmin, const at::Tensor& kmax) {
  return kmin.defined() && kmax.defined() && kmin.is_cuda() && kmin.device() == kmax.device() &&
         kv_element(kmin.scalar_type()) && kmin.scalar_type() == kmax.scalar_type() &&
         kmin.dim() == 3 && kmin.sizes() == kmax.sizes() && kmin.size(2) <= kSharedFloats;
}

bool quest_fold_in_scores_supported(const at::Tensor& q, const at::Tensor& kmin,
                                    const at::Tensor& kmax, const QuestFoldArgs& fold) {
  if (!quest_page_scores_supported(kmin, kmax) || !quest_layout_ok(kmin, kmax)) return false;
  const int64_t H = kmin.size(0), P = kmin.size(1), d = kmin.size(2);
  const at::Tensor& pool = fold.pool;
  const at::Tensor& rows = fold.rows;
  return q.dim() == 3 && q.size(1) * d <= kSharedFloats && pool.defined() && rows.defined() &&
         pool.device() == kmin.device() && pool.scalar_type() == kmin.scalar_type() &&
         pool.dim() == 2 && pool.size(1) == d && pool.is_contiguous() &&
         rows.device() == kmin.device() && rows.scalar_type() == at::kLong && rows.dim() == 1 &&
         rows.size(0) == H && fold.page >= 0 && fold.page < P;
}

bool quest_fold_key_supported(const at::Tensor& kmin, const at::Tensor& kmax, const at::Tensor& k,
                              int64_t page) {
  for (const at::Tensor* t : {&kmin, &kmax, &k})
    if (!t->defined() || !t->is_cuda() || t->device() != kmin.device() || !t->is_contiguous() ||
        t->scalar_type() != kmin.scalar_type())
      return false;
  return kv_element(kmin.scalar_type()) && kmin.dim() == 3 && kmin.sizes() == kmax.sizes() &&
         k.dim() == 2 && k.size(0) == kmin.size(0) && k.size(1) == kmin.size(2) && page >= 0 &&
         page < kmin.size(1);
}

void quest_fold_key(at::Tensor& kmin, at::Tensor& kmax, const at::Tensor& k, int64_t page,
                    bool fresh) {
  require(quest_fold_key_supported(kmin, kmax, k, page),
          "quest_fold_key: needs contiguous CUDA summaries kmin, kmax [H, cap, d] and k [H, d] "
          "of one dtype (f32, bf16, f16) on one device, 0 <= page < cap");
  const c10::cuda::CUDAGuard guard(k.device());
  quest_fold_key(kmin.data_ptr(), kmax.data_ptr(), *kv_element(k.scalar_type()), k.data_ptr(),
                 k.size(0), k.size(1), kmin.size(1) * kmin.size(2), page, fresh,
                 current_stream());
  check_launch("quest_fold_key");
}

bool top_pages_supported(const at::Tensor& scores) {
  return scores.defined() && scores.is_cuda() && scores.scalar_type() == at::kFloat &&
         scores.dim() == 2 && (scores.size(1) <= 1 || scores.stride(1) == 1);
}

at::Tensor top_pages(const at::Tensor& scores, int64_t pages, int64_t whole, int64_t part,
                     int64_t page_size, int64_t n, int64_t lead, int64_t chunk,
                     const at::Tensor& limit) {
  require(top_pages_supported(scores),
          "top_pages: needs CUDA fp32 page scores [rows, P] with unit channel stride");
  require(kernels::top_pages_arguments_ok(scores.size(1), pages, whole, part, page_size, n, lead),
          std::string("top_pages: needs ") + kernels::kTopPagesContract);
  require(chunk >= kAutoChunk, "top_pages: chunk must be kAutoChunk, 0 or a page count");
  require(!limit.defined() ||
              (limit.numel() == 1 && limit.scalar_type() == at::kLong &&
               limit.device() == scores.device() && page_size == 1 && part == 0 && n > pages),
          "top_pages: a limit is one int64 on the scores' device, with pages of one entry, no "
          "part and trailing entries");
  const c10::cuda::CUDAGuard guard(scores.device());
  const int64_t rows = scores.size(0), taken = whole + (part > 0 ? 1 : 0);
  if (chunk == kAutoChunk) chunk = top_pages_auto_chunk(pages, taken);
  if (taken == 0 || rows > 65535) chunk = 0;  // nothing to rank, or beyond a grid's rows
  at::Tensor out = at::empty({rows, lead + whole * page_size + part + n - pages * page_size},
                             scores.options().dtype(at::kLong));  // [rows, width]
  at::Tensor candidate_scores, candidate_pages;  // [rows, candidates]: the chunks' best pages
  if (chunk > 0) {
    const int64_t candidates = top_pages_candidates(pages, taken, chunk);
    candidate_scores = at::empty({rows, candidates}, scores.options());
    candidate_pages = at::empty({rows, candidates}, scores.options().dtype(at::kInt));
  }
  top_pages(scores.data_ptr<float>(), rows > 1 ? scores.stride(0) : 0, out.data_ptr<int64_t>(),
            rows, pages, whole, part, page_size, n, lead, chunk,
            chunk > 0 ? candidate_scores.data_ptr<float>() : nullptr,
            chunk > 0 ? candidate_pages.data_ptr<int32_t>() : nullptr, current_stream(),
            limit.defined() ? limit.data_ptr<int64_t>() : nullptr);
  check_launch("top_pages");
  return out;
}

bool rms_norm_supported(const at::Tensor& x, const at::Tensor& weight) {
  return x.defined() && weight.defined() && x.is_cuda() && x.dim() >= 1 && weight.dim() == 1 &&
         weight.size(0) == x.size(-1) && weight.device() == x.device() &&
         weight.scalar_type() == x.scalar_type() && kv_element(x.scalar_type()) &&
         x.is_contiguous() && weight.is_contiguous() && x.size(-1) < INT_MAX &&
         (x.size(-1) == 0 || x.numel() / x.size(-1) < INT_MAX);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  require(rms_norm_supported(x, weight),
          "rms_norm: needs contiguous CUDA x [..., D] and weight [D] of one dtype (f32, bf16, "
          "f16) on one device");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x);
  const int64_t dim = x.size(-1);
  if (x.numel() == 0) return out;
  rms_norm(x.data_ptr(), weight.data_ptr(), out.data_ptr(), *kv_element(x.scalar_type()),
           x.numel() / dim, dim, float(eps), current_stream());
  check_launch("rms_norm");
  return out;
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                               const at::Tensor& weight, double eps) {
  require(rms_norm_supported(x, weight) && residual.device() == x.device() &&
              residual.scalar_type() == x.scalar_type() && residual.sizes() == x.sizes() &&
              residual.is_contiguous(),
          "add_rms_norm: needs contiguous CUDA x and residual [..., D] and weight [D] of one "
          "dtype (f32, bf16, f16) on one device");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor sum = at::empty_like(x), out = at::empty_like(x);
  const int64_t dim = x.size(-1);
  if (x.numel() == 0) return {sum, out};
  add_rms_norm(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), sum.data_ptr(),
               out.data_ptr(), *kv_element(x.scalar_type()), x.numel() / dim, dim, float(eps),
               current_stream());
  check_launch("add_rms_norm");
  return {sum, out};
}

bool write_kv_rows_supported(const at::Tensor& k_pool, const at::Tensor& v_pool,
                             const at::Tensor& rows, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&k_pool, &v_pool, &rows, &k, &v})
    if (!t->defined() || !t->is_cuda() || t->device() != k_pool.device() ||
        (t != &rows && !t->is_contiguous()))
      return false;
  return k_pool.dim() == 2 && v_pool.sizes() == k_pool.sizes() && k.dim() == 2 &&
         v.sizes() == k.sizes() && k.size(1) == k_pool.size(1) && rows.dim() == 1 &&
         rows.size(0) == k.size(0) && rows.scalar_type() == at::kLong &&
         k_pool.scalar_type() == v_pool.scalar_type() && k.scalar_type() == k_pool.scalar_type() &&
         v.scalar_type() == k_pool.scalar_type();
}

void write_kv_rows(at::Tensor& k_pool, at::Tensor& v_pool, const at::Tensor& rows,
                   const at::Tensor& k, const at::Tensor& v) {
  require(write_kv_rows_supported(k_pool, v_pool, rows, k, v),
          "write_kv_rows: needs contiguous CUDA pools [R, d], k and v [n, d] of their dtype and "
          "rows [n] int64, on one device");
  const c10::cuda::CUDAGuard guard(k_pool.device());
  write_kv_rows(k_pool.data_ptr(), v_pool.data_ptr(), rows.data_ptr<int64_t>(), rows.stride(0),
                k.data_ptr(), v.data_ptr(), k.size(0), k.size(1) * int64_t(k.element_size()),
                current_stream());
  check_launch("write_kv_rows");
}

bool rope_rotate_half_supported(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (!x.defined() || !cos.defined() || !sin.defined() || !x.is_cuda() || x.dim() < 2 ||
      cos.dim() != 2 || cos.sizes() != sin.sizes() || !kv_element(x.scalar_type()))
    return false;
  const int64_t L = x.size(-2), d = x.size(-1), r = cos.size(1);
  return cos.device() == x.device() && sin.device() == x.device() &&
         cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type() &&
         x.is_contiguous() && cos.is_contiguous() && sin.is_contiguous() && cos.size(0) == L &&
         r > 0 && r % 2 == 0 && r <= d && x.numel() < INT_MAX;
}

at::Tensor rope_rotate_half(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  require(rope_rotate_half_supported(x, cos, sin),
          "rope_rotate_half: needs contiguous CUDA x [..., L, d] and cos, sin [L, r] of its dtype "
          "(f32, bf16, f16) on its device, r even, r <= d");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x);
  const int64_t L = x.size(-2), d = x.size(-1);
  if (x.numel() == 0) return out;
  rope_rotate_half(x.data_ptr(), cos.data_ptr(), sin.data_ptr(), out.data_ptr(),
                   *kv_element(x.scalar_type()), x.numel() / (L * d), L, d, cos.size(1),
                   current_stream());
  check_launch("rope_rotate_half");
  return out;
}

at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax,
                             bool sum_group, const QuestFoldArgs* fold) {
  require(!fold || quest_fold_in_scores_supported(q, kmin, kmax, *fold),
          "quest_page_scores: a fold needs summaries read in place, the group's queries in one "
          "launch, a contiguous pool [R, d] of their dtype and rows [H] int64 on their device");
  require(quest_page_scores_supported(kmin, kmax),
          "quest_page_scores: needs CUDA page summaries kmin, kmax [H, P, d] of one shape and "
          "dtype (f32, bf16, f16), d <= 12288");
  require_device("quest_page_scores", q, {&q, &kmin, &kmax}, 3);
  const int64_t H = kmin.size(0), P = kmin.size(1), d = kmin.size(2), g = q.size(1);
  require(q.size(0) == H && q.size(2) == d,
          "quest_page_scores: q must be [H, g, d] matching the summaries [H, P, d]");
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor lo = kmin, hi = kmax;
  if (!quest_layout_ok(lo, hi)) lo = kmin.contiguous(), hi = kmax.contiguous();
  const int64_t head_stride = H > 1 ? lo.stride(0) : P * d;
  // [H, g, d] read in its dtype where the kernel takes it (the model's: no cast per step)
  at::Tensor qc = (kv_element(q.scalar_type()) ? q : q.to(at::kFloat)).contiguous();
  at::Tensor out = at::empty({H, sum_group ? 1 : g, P}, q.options().dtype(at::kFloat));
  if (H == 0 || P == 0) return out;
  if (g == 0) return out.zero_();
  // Query heads per launch: the group's queries [g', d] sit in shared memory (widened).
  const int64_t step = std::min<int64_t>(g, kSharedFloats / d);
  for (int64_t g0 = 0; g0 < g; g0 += step) {
    const int64_t n = std::min(step, g - g0);
    at::Tensor qs = step == g ? qc : qc.narrow(1, g0, n).contiguous();           // [H, n, d]
    // One launch: written in place. Several: each writes its own block, summed or placed.
    at::Tensor part = step == g ? out : at::empty({H, sum_group ? 1 : n, P}, out.options());
    const QuestFold step_fold =
        fold ? QuestFold{fold->pool.data_ptr(), fold->rows.data_ptr<int64_t>(),
                         fold->rows.stride(0), fold->page, fold->fresh}
             : QuestFold{};
    quest_page_scores(qs.data_ptr(), *kv_element(qs.scalar_type()), lo.data_ptr(), hi.data_ptr(),
                      *kv_element(lo.scalar_type()), part.data_ptr<float>(), H, n, P, d,
                      head_stride, sum_group, current_stream(), fold ? &step_fold : nullptr);
    check_launch("quest_page_scores");
    if (step == g) break;
    if (sum_group) {
      if (g0 == 0) out.copy_(part);
      else out.add_(part);
    } else {
      out.narrow(1, g0, n).copy_(part);
    }
  }
  return out;
}

bool pq_scores_supported(const at::Tensor& centroids) {
  return centroids.defined() && centroids.is_cuda() && centroids.scalar_type() == at::kFloat &&
         centroids.dim() == 4 && centroids.size(2) <= 256 &&
         centroids.size(1) * centroids.size(2) <= kSharedFloats;
}

at::Tensor pq_scores(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                     double scale) {
  require(pq_scores_supported(centroids),
          "pq_scores: needs fp32 CUDA centroids [H, m, K, s] with K <= 256 and m*K <= 12288");
  require_device("pq_scores", centroids, {&centroids}, 4);
  require_device("pq_scores", centroids, {&q, &codes}, 3);
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3);
  require(q.size(0) == H && q.size(2) == m * s && codes.size(0) == H && codes.size(1) == m,
          "pq_scores: q [H, g, m*s] / codes [H, m, n] do not match the centroids [H, m, K, s]");
  require(at::isIntegralType(codes.scalar_type(), /*includeBool=*/false),
          "pq_scores: codes must be integers");
  const int64_t g = q.size(1), n = codes.size(2);
  const c10::cuda::CUDAGuard guard(q.device());
  // [H, g, m*s] read in its dtype where the kernel takes it (the model's: no cast per step)
  at::Tensor qc = (kv_element(q.scalar_type()) ? q : q.to(at::kFloat)).contiguous();
  at::Tensor cc = centroids.contiguous();                                         // [H, m, K, s]
  at::Tensor codes8 = pq_codes_as_read(codes);  // [H, m, n]
  at::Tensor out = at::empty({H, g, n}, q.options().dtype(at::kFloat));
  if (H == 0 || g == 0 || n == 0) return out;
  // Query heads per launch: their lookup tables [g', m, K] sit in shared memory.
  const int64_t step = std::min<int64_t>(g, kSharedFloats / std::max<int64_t>(1, m * K));
  for (int64_t g0 = 0; g0 < g; g0 += step) {
    const int64_t len = std::min(step, g - g0);
    at::Tensor qs = step == g ? qc : qc.narrow(1, g0, len).contiguous();          // [H, len, m*s]
    at::Tensor part = step == g ? out : at::empty({H, len, n}, out.options());
    pq_scores(qs.data_ptr(), *kv_element(qs.scalar_type()), cc.data_ptr<float>(),
              codes8.data_ptr<uint8_t>(), part.data_ptr<float>(), H, len, m, K, s, n,
              codes8.stride(1), float(scale), current_stream());
    check_launch("pq_scores");
    if (step == g) break;
    out.narrow(1, g0, len).copy_(part);
  }
  return out;
}

bool pq_top_k_supported(const at::Tensor& q, const at::Tensor& centroids) {
  return pq_scores_supported(centroids) && centroids.size(2) >= 1 && q.defined() &&
         q.dim() == 3 &&
         kernels::pq_combinations(centroids.size(1), centroids.size(2)) <=
             kernels::kPqMaxCombinations &&
         pq_top_k_shared_bytes(q.size(1), centroids.size(1), centroids.size(2)) <=
             kPqTopKSharedBytes;
}

at::Tensor pq_top_k(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                    double scale, int64_t k, int64_t lead, int64_t trailing, int64_t slices) {
  require(pq_top_k_supported(q, centroids),
          "pq_top_k: needs fp32 CUDA centroids [H, m, K, s] with K <= 256 and K^m <= 4096, "
          "and q [H, g, m*s] whose tables fit 45 KiB");
  require_device("pq_top_k", centroids, {&centroids}, 4);
  require_device("pq_top_k", centroids, {&q, &codes}, 3);
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), g = q.size(1), n = codes.size(2);
  require(q.size(0) == H && q.size(2) == m * s && codes.size(0) == H && codes.size(1) == m,
          "pq_top_k: q [H, g, m*s] / codes [H, m, n] do not match the centroids [H, m, K, s]");
  require(at::isIntegralType(codes.scalar_type(), /*includeBool=*/false),
          "pq_top_k: codes must be integers");
  require(k >= 0 && k <= n && lead >= 0 && trailing >= 0,
          "pq_top_k: needs 0 <= k <= n, lead >= 0 and trailing >= 0");
  require(slices == kAutoSlices || (slices >= 1 && slices <= kPqTopKMaxSlices),
          "pq_top_k: slices must be kAutoSlices or 1 to 64");
  if (slices == kAutoSlices) slices = pq_top_k_auto_slices(n);
  const c10::cuda::CUDAGuard guard(q.device());
  // q [H, g, m*s] in its dtype where the kernel reads it; centroids [H, m, K, s]; codes [H, m, n]
  at::Tensor qc = (kv_element(q.scalar_type()) ? q : q.to(at::kFloat)).contiguous();
  at::Tensor cc = centroids.contiguous();
  at::Tensor codes8 = pq_codes_as_read(codes);
  at::Tensor out = at::empty({H, lead + k + trailing}, q.options().dtype(at::kLong));
  at::Tensor partial;  // [H, slices, K^m]: each slice's tokens per combination
  if (slices > 1)
    partial = at::empty({H, slices, kernels::pq_combinations(m, K)}, q.options().dtype(at::kInt));
  pq_top_k(qc.data_ptr(), *kv_element(qc.scalar_type()), cc.data_ptr<float>(),
           codes8.data_ptr<uint8_t>(), H, g, m, K, s, n, codes8.stride(1), float(scale), k, lead,
           trailing, out.data_ptr<int64_t>(), slices,
           slices > 1 ? partial.data_ptr<int32_t>() : nullptr, current_stream());
  check_launch("pq_top_k");
  return out;
}

bool pq_encode_supported(const at::Tensor& centroids, const at::Tensor& k_pool,
                         const at::Tensor& rows, const at::Tensor& codes) {
  const auto on = [&](const at::Tensor& t, int64_t dims) {
    return t.defined() && t.is_cuda() && t.device() == centroids.device() && t.dim() == dims;
  };
  return on(centroids, 4) && on(k_pool, 2) && on(rows, 2) && on(codes, 3) &&
         centroids.scalar_type() == at::kFloat && centroids.is_contiguous() &&
         centroids.size(2) >= 1 && centroids.size(2) <= 256 && kv_element(k_pool.scalar_type()) &&
         k_pool.is_contiguous() &&
         k_pool.size(1) == centroids.size(1) * centroids.size(3) &&
         rows.scalar_type() == at::kLong && (rows.size(1) <= 1 || rows.stride(1) == 1) &&
         codes.scalar_type() == at::kByte && (codes.size(2) <= 1 || codes.stride(2) == 1) &&
         rows.size(0) == centroids.size(0) && codes.size(0) == centroids.size(0) &&
         codes.size(1) == centroids.size(1) && centroids.size(0) <= 65535 &&
         centroids.size(1) <= 65535;
}

void pq_encode(const at::Tensor& centroids, const at::Tensor& k_pool, const at::Tensor& rows,
               at::Tensor& codes, int64_t column) {
  require(pq_encode_supported(centroids, k_pool, rows, codes),
          "pq_encode: needs fp32 centroids [H, m, K <= 256, s], a contiguous pool [rows, m*s], "
          "int64 rows [H, n] and uint8 codes [H, m, *] on one CUDA device");
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), n = rows.size(1);
  require(column >= 0 && column + n <= codes.size(2),
          "pq_encode: columns " + std::to_string(column) + " .. " + std::to_string(column + n) +
              " outside the codes' " + std::to_string(codes.size(2)));
  require(n < INT_MAX, "pq_encode: more than INT_MAX keys");
  // The pool rows are not range-checked (a device read): they come from a LayerKV's row table.
  const c10::cuda::CUDAGuard guard(centroids.device());
  pq_encode(k_pool.data_ptr(), *kv_element(k_pool.scalar_type()), rows.data_ptr<int64_t>(),
            rows.stride(0), centroids.data_ptr<float>(), codes.data_ptr<uint8_t>(),
            codes.stride(0), codes.stride(1), column, H, n, m, K, s, current_stream());
  check_launch("pq_encode");
}

at::Tensor centroid_update(const at::Tensor& keys, const at::Tensor& labels, const at::Tensor& old,
                           at::Tensor* counts) {
  require_device("centroid_update", keys, {&keys, &old}, 3);
  require_device("centroid_update", keys, {&labels}, 2);
  require(at::isFloatingType(keys.scalar_type()) && at::isFloatingType(old.scalar_type()) &&
              at::isIntegralType(labels.scalar_type(), /*includeBool=*/false),
          "centroid_update: needs floating keys and centroids and integer labels");
  const int64_t H = keys.size(0), n = keys.size(1), d = keys.size(2), C = old.size(1);
  require(labels.size(0) == H && labels.size(1) == n && old.size(0) == H && old.size(2) == d,
          "centroid_update: keys [H, n, d], labels [H, n] and old [H, C, d] do not match");
  const c10::cuda::CUDAGuard guard(keys.device());
  at::Tensor k = keys.to(at::kFloat).contiguous();                                 // [H, n, d]
  at::Tensor l = labels.to(at::kInt).contiguous();                                 // [H, n]
  at::Tensor o = old.to(at::kFloat).contiguous();                                  // [H, C, d]
  at::Tensor out = at::empty({H, C, d}, k.options());
  // Always given: scratch on the kernel's global-memory path (C * (d + 1) beyond 48 KiB).
  at::Tensor sizes = at::empty({H, C}, k.options().dtype(at::kInt));
  centroid_update(k.data_ptr<float>(), l.data_ptr<int32_t>(), o.data_ptr<float>(),
                  out.data_ptr<float>(), H, n, C, d, sizes.data_ptr<int32_t>(), current_stream());
  check_launch("centroid_update");
  if (counts) *counts = sizes;
  return out;
}

bool cosine_assign_supported(const at::Tensor& keys, const at::Tensor& centroids) {
  return keys.is_cuda() && keys.dim() == 3 && centroids.dim() == 3 &&
         (keys.scalar_type() == at::kBFloat16 || keys.scalar_type() == at::kHalf) &&
         centroids.device() == keys.device() && centroids.size(0) == keys.size(0) &&
         centroids.size(2) == keys.size(2) && keys.size(0) <= 65535 &&
         cosine_assign_supported(keys.size(1), keys.size(2), centroids.size(1)) &&
         // rows read as 16-byte vectors: a contiguous view in place, else a fresh copy
         (!keys.is_contiguous() || reinterpret_cast<uintptr_t>(keys.data_ptr()) % 16 == 0);
}

at::Tensor cosine_assign(const at::Tensor& keys, const at::Tensor& centroids) {
  require(cosine_assign_supported(keys, centroids),
          "cosine_assign: needs bf16 or f16 keys [H, n, d] on a GPU, d a multiple of 16 up to "
          "128, and centroids [H, C, d] on their device");
  const c10::cuda::CUDAGuard guard(keys.device());
  const int64_t H = keys.size(0), n = keys.size(1), d = keys.size(2), C = centroids.size(1);
  // Normalised by the caller; rows read as 16-byte vectors, so a view that starts off 16 bytes
  // (a slice of a larger tensor) is copied.
  at::Tensor c = centroids.to(keys.scalar_type()).contiguous();
  if (reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 != 0) c = c.clone();
  const at::Tensor k = keys.contiguous();  // 16-byte aligned rows: d % 16 == 0, fresh storage
  at::Tensor labels = at::empty({H, n}, keys.options().dtype(at::kLong));
  cosine_assign(k.data_ptr(), c.data_ptr(), *kv_element(keys.scalar_type()),
                labels.data_ptr<int64_t>(), H, n, C, d, current_stream());
  check_launch("cosine_assign");
  return labels;
}

bool cluster_rows_supported(const at::Tensor& scores, const at::Tensor& sizes,
                            const at::Tensor& starts, const at::Tensor& members, int64_t n) {
  auto on_gpu = [&](const at::Tensor& t, at::ScalarType type) {
    return t.defined() && t.is_cuda() && t.device() == scores.device() && t.dim() == 2 &&
           t.scalar_type() == type && t.is_contiguous() && t.size(0) == scores.size(0);
  };
  if (!(scores.defined() && on_gpu(scores, at::kFloat) && on_gpu(sizes, at::kInt) &&
        on_gpu(starts, at::kInt) && on_gpu(members, at::kInt) &&
        sizes.size(1) == scores.size(1) && starts.size(1) == scores.size(1) &&
        scores.size(0) <= 65535))
    return false;
  const c10::cuda::CUDAGuard guard(scores.device());  // the limit of the scores' device
  return cluster_rows_fit(scores.size(1), n);
}

at::Tensor cluster_rows(const at::Tensor& scores, const at::Tensor& sizes, const at::Tensor& starts,
                        const at::Tensor& members, int64_t taken, int64_t sinks,
                        int64_t recent_begin, int64_t n, const at::Tensor& last_selected,
                        int64_t step, int64_t oldest_hit, const at::Tensor& hits) {
  require(cluster_rows_supported(scores, sizes, starts, members, n),
          "cluster_rows: needs fp32 scores [H, C], int32 sizes and starts [H, C] and members "
          "[H, N], contiguous, on one CUDA device, C clusters and n entries within shared memory");
  const int64_t H = scores.size(0);
  require(taken >= 0 && taken <= members.size(1) && sinks >= 0 && sinks <= recent_begin &&
              recent_begin <= n,
          "cluster_rows: needs 0 <= taken <= N and 0 <= sinks <= recent_begin <= n");
  const bool cache = last_selected.defined();
  if (cache)
    require(last_selected.device() == scores.device() && last_selected.scalar_type() == at::kLong &&
                last_selected.dim() == 2 && last_selected.size(0) == H &&
                last_selected.size(1) >= n && last_selected.is_contiguous() && hits.defined() &&
                hits.device() == scores.device() && hits.scalar_type() == at::kLong &&
                hits.numel() == 1,
            "cluster_rows: last_selected must be [H, >= n] int64, contiguous, and hits an int64 "
            "scalar, on the scores' device");
  const c10::cuda::CUDAGuard guard(scores.device());
  at::Tensor out = at::empty({H, sinks + taken + n - recent_begin},
                             scores.options().dtype(at::kLong));  // [H, width]
  cluster_rows(scores.data_ptr<float>(), sizes.data_ptr<int32_t>(), starts.data_ptr<int32_t>(),
               members.data_ptr<int32_t>(), H, scores.size(1), members.size(1), taken, sinks,
               recent_begin, n, cache ? last_selected.data_ptr<int64_t>() : nullptr,
               cache ? last_selected.size(1) : 0, step, oldest_hit,
               cache ? hits.data_ptr<int64_t>() : nullptr, out.data_ptr<int64_t>(),
               current_stream());
  check_launch("cluster_rows");
  return out;
}

}  // namespace kvb::cuda
