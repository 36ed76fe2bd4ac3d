// The LibTorch glue of the CUDA kernels (kernels/cuda/torch_glue.h) against ATen on the CPU
// (label "gpu"). Linked into kvbench_gpu_tests only against a CUDA LibTorch; against a CPU
// LibTorch it is compiled for CUDA, not linked (target kvbench_torch_glue_check), and runs in
// the CUDA emulation on host tensors (kvbench_cuda_emulation_glue_tests, label
// "cuda_emulation"). Every test reports "skipped: no GPU" where no device exists.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/torch_glue.h"
#include "tests/kernels/cuda/require_gpu.h"

namespace kvb::cuda {
namespace {

#ifdef KVBENCH_CUDA_EMULATION
// tests/cuda_emulation/README.md: the emulated device's memory is the host's, so the glue takes
// host tensors for device ones, and none is refused for being on the CPU.
const at::Device kGpu(at::kCPU);
constexpr bool kRefusesHostTensors = false;
// The emulation runs a block's threads as fibers, one block at a time (a few ms a block of 512
// threads): launches of many blocks are left to a GPU (the raw emulation tests run every launch
// path on smaller grids).
constexpr int64_t kMostBlocks = 16;
#else
const at::Device kGpu(at::kCUDA, 0);
constexpr bool kRefusesHostTensors = true;
constexpr int64_t kMostBlocks = INT64_MAX;
#endif

at::Tensor randn(std::vector<int64_t> shape) { return at::randn(shape, at::kFloat); }

void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance = 1e-4) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const at::Tensor g = got.to(at::kCPU, at::kFloat), w = want.to(at::kFloat);
  const double scale = std::max(1.0, w.abs().max().item<double>());
  EXPECT_LT((g - w).abs().max().item<double>() / scale, tolerance);
}

// q [H, g, d], lo/hi [H, P, d] -> [H, g, P].
at::Tensor quest_reference(const at::Tensor& q, const at::Tensor& lo, const at::Tensor& hi) {
  at::Tensor qf = q.to(at::kFloat).unsqueeze(2);                          // [H, g, 1, d]
  return at::maximum(qf * hi.unsqueeze(1), qf * lo.unsqueeze(1)).sum(-1);  // [H, g, P]
}

// Decode attention by definition on the CPU in double: unit u's g queries over its rows.
at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k_pool,
                               const at::Tensor& v_pool, const std::vector<int64_t>& indptr,
                               const std::vector<int64_t>& rows, double scale) {
  const int64_t units = int64_t(indptr.size()) - 1, g = q.size(0) / units, d = q.size(1);
  at::Tensor out = at::zeros({q.size(0), d}, at::kDouble);
  for (int64_t u = 0; u < units; ++u) {
    if (indptr[u + 1] == indptr[u]) continue;  // an empty unit: zeros
    at::Tensor ids = at::tensor(std::vector<int64_t>(rows.begin() + indptr[u],
                                                     rows.begin() + indptr[u + 1]));
    at::Tensor k = k_pool.to(at::kDouble).index_select(0, ids);  // [n, d]
    at::Tensor v = v_pool.to(at::kDouble).index_select(0, ids);
    at::Tensor qu = q.to(at::kDouble).narrow(0, u * g, g);       // [g, d]
    out.narrow(0, u * g, g).copy_(at::softmax(at::mm(qu, k.t()) * scale, -1).mm(v));
  }
  return out;
}

// The softmax probabilities by definition (CPU, double), laid out as the kernel writes them:
// unit u's [g, n_u] at g * indptr[u].
at::Tensor probs_reference(const at::Tensor& q, const at::Tensor& k_pool,
                           const std::vector<int64_t>& indptr, const std::vector<int64_t>& rows,
                           double scale) {
  const int64_t units = int64_t(indptr.size()) - 1, g = q.size(0) / units;
  std::vector<at::Tensor> parts;
  for (int64_t u = 0; u < units; ++u) {
    at::Tensor ids = at::tensor(std::vector<int64_t>(rows.begin() + indptr[u],
                                                     rows.begin() + indptr[u + 1]));
    at::Tensor k = k_pool.to(at::kDouble).index_select(0, ids);  // [n, d]
    at::Tensor qu = q.to(at::kDouble).narrow(0, u * g, g);       // [g, d]
    parts.push_back(at::softmax(at::mm(qu, k.t()) * scale, -1).reshape({-1}));
  }
  return at::cat(parts);
}

// Random pools of `pool_rows` rows; unit u attends `counts[u]` distinct random rows. q and the
// result in `q_dtype` (default: the pools' `dtype`).
void check_decode_attention(int64_t Hq, int64_t d, int64_t pool_rows,
                            const std::vector<int64_t>& counts, at::ScalarType dtype,
                            double tolerance,
                            std::optional<at::ScalarType> q_dtype = std::nullopt) {
  SCOPED_TRACE("Hq " + std::to_string(Hq) + ", d " + std::to_string(d) + ", " +
               c10::toString(dtype) + ", q " + c10::toString(q_dtype.value_or(dtype)));
  at::manual_seed(11);
  const int64_t units = int64_t(counts.size());
  std::vector<int64_t> indptr = {0}, rows;
  for (int64_t u = 0; u < units; ++u) {
    at::Tensor pick = at::randperm(pool_rows, at::kLong).narrow(0, 0, counts[size_t(u)]);
    rows.insert(rows.end(), pick.data_ptr<int64_t>(), pick.data_ptr<int64_t>() + pick.numel());
    indptr.push_back(int64_t(rows.size()));
  }
  at::Tensor q = randn({Hq, d}).to(q_dtype.value_or(dtype)), k = randn({pool_rows, d}).to(dtype),
             v = randn({pool_rows, d}).to(dtype);
  const double scale = 1.0 / std::sqrt(double(d));
  at::Tensor want = attention_reference(q, k, v, indptr, rows, scale);
  at::Tensor qg = q.to(kGpu), kg = k.to(kGpu), vg = v.to(kGpu);
  ASSERT_TRUE(sparse_decode_attention_supported(qg, kg, vg, units));
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  at::Tensor got = sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu),
                                           at::tensor(rows).to(kGpu), scale, longest);
  EXPECT_EQ(got.scalar_type(), q.scalar_type());
  expect_close(got, want, tolerance);
  if (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf) {
    at::Tensor f32 = sparse_decode_attention(qg.to(at::kFloat), kg, vg, at::tensor(indptr).to(kGpu),
                                             at::tensor(rows).to(kGpu), scale, longest);
    // A 16-bit q of the pools' type at d = 128 runs on the tensor cores (p rounded), the fp32
    // one on the CUDA cores. Elsewhere both run on the CUDA cores: q read as it is and out
    // written in its dtype, the bits of the fp32 call rounded to it, as casts before and after
    // the kernel gave.
    if (d == 128 && q.scalar_type() == dtype)
      expect_close(f32.to(q.scalar_type()), want, tolerance);
    else
      EXPECT_TRUE(got.equal(f32.to(q.scalar_type())));
  }
  // An upper bound for `longest` (nnz, as when the host does not know) gives the same result.
  at::Tensor bound = sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu),
                                             at::tensor(rows).to(kGpu), scale,
                                             int64_t(rows.size()));
  expect_close(bound, want, tolerance);
  // The lists as the rows of a wider table, a view read through its stride (as the engine
  // passes a block table's rows): the slots past a unit's count hold other pool rows.
  const int64_t width = longest + 3;
  at::Tensor table = at::randint(pool_rows, {units, width + 2}, at::kLong);
  for (int64_t u = 0; u < units; ++u)
    table[u].narrow(0, 0, counts[size_t(u)])
        .copy_(at::tensor(rows).narrow(0, indptr[size_t(u)], counts[size_t(u)]));
  const at::Tensor view = table.to(kGpu).narrow(1, 0, width);  // [units, width], stride width + 2
  at::Tensor from_table = sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu), view,
                                                  scale, longest);
  expect_close(from_table, want, tolerance);
  // With the probabilities (H2O's and KV-Compress's scores), from the table and packed: the same
  // output, and softmax by definition in the kernel's layout.
  for (const at::Tensor& list : {view, at::tensor(rows).to(kGpu)}) {
    at::Tensor probs;
    at::Tensor with_probs = sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu), list,
                                                    scale, longest, &probs, int64_t(rows.size()));
    expect_close(with_probs, want, tolerance);
    ASSERT_EQ(probs.numel(), (Hq / units) * int64_t(rows.size()));
    // Relative to each probability (the same K/V values on both sides; fp32 scores): a unit
    // of zeros, or probabilities off by a factor, fails.
    const at::Tensor ref = probs_reference(q, k, indptr, rows, scale);
    const at::Tensor err = (probs.cpu().to(at::kDouble) - ref).abs() / (ref + 1e-30);
    EXPECT_LT(err.max().item<double>(), 1e-3);
  }
  // nnz unknown on the host: read from the device, the same probabilities.
  at::Tensor probs, probs_read;
  sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu), at::tensor(rows).to(kGpu), scale,
                          longest, &probs, int64_t(rows.size()));
  sparse_decode_attention(qg, kg, vg, at::tensor(indptr).to(kGpu), at::tensor(rows).to(kGpu), scale,
                          longest, &probs_read);
  EXPECT_TRUE(probs.equal(probs_read));
}

TEST(TorchGlue, DecodeAttentionRaggedAndEmptyUnitsInEveryDtype) {
  KVB_REQUIRE_GPU();
  // Llama-3 shape (32 query heads over 8 KV heads of 128): ragged lists, an empty unit, one row.
  const std::vector<int64_t> counts = {1024, 1000, 1, 0, 256, 3000, 64, 999};
  check_decode_attention(32, 128, 8192, counts, at::kFloat, 1e-4);
  check_decode_attention(32, 128, 8192, counts, at::kBFloat16, 2e-2);
  check_decode_attention(32, 128, 8192, counts, at::kHalf, 5e-3);
  // Per query head (g = 1), small and odd head dims.
  check_decode_attention(8, 64, 3000, {2500, 5, 0, 700, 1, 2, 3, 4}, at::kFloat, 1e-4);
  check_decode_attention(6, 40, 500, {100, 7, 300}, at::kFloat, 1e-4);
  // Every row width of the vector kernel (2 to 32 lanes of 16 bytes) and group sizes 1-8; a
  // bf16 row of 80 bytes takes the scalar kernel.
  check_decode_attention(16, 256, 4096, {4000, 1, 0, 33}, at::kBFloat16, 2e-2);
  check_decode_attention(16, 32, 4096, {4000, 17}, at::kBFloat16, 2e-2);
  check_decode_attention(3, 16, 600, {500, 2, 9}, at::kHalf, 5e-3);
  check_decode_attention(12, 40, 600, {500, 0, 77}, at::kBFloat16, 2e-2);
  check_decode_attention(8, 128, 2048, {2000, 2, 3, 600}, at::kFloat, 1e-4);
  // q (and the result) in another dtype than the pools: read and written by the kernel as
  // they are, or converted (f64).
  check_decode_attention(32, 128, 4096, {1024, 0, 7, 3000, 1, 64, 512, 100}, at::kBFloat16, 2e-2,
                         at::kFloat);
  check_decode_attention(32, 128, 4096, {1024, 0, 7, 3000}, at::kFloat, 2e-2, at::kBFloat16);
  check_decode_attention(8, 64, 1000, {900, 3}, at::kHalf, 5e-3, at::kDouble);
}

TEST(TorchGlue, DecodeAttentionOver128kRows) {
  KVB_REQUIRE_GPU();
  check_decode_attention(8, 128, 131072, {131072, 131072}, at::kBFloat16, 2e-2);
}

TEST(TorchGlue, DecodeAttentionRefusesWhatItCannotRun) {
  KVB_REQUIRE_GPU();
  const at::Tensor pool = randn({64, 128}).to(kGpu);
  EXPECT_FALSE(sparse_decode_attention_supported(randn({32, 128}).to(kGpu), pool, pool, 2));  // g 16
  if (kRefusesHostTensors) {
    EXPECT_FALSE(sparse_decode_attention_supported(randn({4, 128}), pool, pool, 2));  // q on the CPU
  }
  EXPECT_FALSE(sparse_decode_attention_supported(randn({4, 512}).to(kGpu), randn({64, 512}).to(kGpu),
                                                 randn({64, 512}).to(kGpu), 2));  // d 512
  EXPECT_THROW(sparse_decode_attention(randn({32, 128}).to(kGpu), pool, pool,
                                       at::tensor(std::vector<int64_t>{0, 1, 2}).to(kGpu),
                                       at::tensor(std::vector<int64_t>{0, 1}).to(kGpu), 1.0, 1),
               std::invalid_argument);
}

TEST(TorchGlue, RmsNormMatchesTransformersFormulaInEveryDtype) {
  KVB_REQUIRE_GPU();
  at::manual_seed(11);
  // A decode row of Llama-3-8B's width, prefill rows, and an odd width (a partial warp).
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 4096}, {3, 77, 512}, {5, 33}}) {
    const at::Tensor x = randn(shape) * 3, w = randn({shape.back()});
    for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + " width " + std::to_string(shape.back()));
      const at::Tensor xg = x.to(kGpu, t), wg = w.to(kGpu, t);
      ASSERT_TRUE(rms_norm_supported(xg, wg));
      const at::Tensor got = rms_norm(xg, wg, 1e-5);
      ASSERT_EQ(got.scalar_type(), t);
      // transformers' LlamaRMSNorm op by op, on the same device and dtype.
      const at::Tensor xf = xg.to(at::kFloat);
      const at::Tensor want = (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-5)).to(t) * wg;
      // The fp32 sum in another order moves r by an ulp or so: in 16 bits, the same bits but
      // where a value sits on a rounding boundary.
      const double same = (got == want).to(at::kDouble).mean().item<double>();
      if (t != at::kFloat) {
        EXPECT_GT(same, 0.99);
      }
      expect_close(got, want.cpu(), t == at::kFloat ? 1e-5 : 1.0 / 64);
    }
  }
}

TEST(TorchGlue, AddRmsNormGivesAtensSumAndItsNormInEveryDtype) {
  KVB_REQUIRE_GPU();
  at::manual_seed(13);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 4096}, {7, 300}}) {
    const at::Tensor x = randn(shape) * 3, residual = randn(shape), w = randn({shape.back()});
    for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + " width " + std::to_string(shape.back()));
      const at::Tensor xg = x.to(kGpu, t), rg = residual.to(kGpu, t), wg = w.to(kGpu, t);
      const auto [sum, normed] = add_rms_norm(xg, rg, wg, 1e-5);
      const at::Tensor want_sum = xg + rg;  // ATen's add on the same device: the same bits
      EXPECT_TRUE(sum.equal(want_sum));
      EXPECT_TRUE(normed.equal(rms_norm(want_sum, wg, 1e-5)));
    }
  }
}

TEST(TorchGlue, KvRowsAreAtensTwoIndexCopiesInEveryDtype) {
  KVB_REQUIRE_GPU();
  at::manual_seed(14);
  // A decode step's 8 rows of 128 from a block table's column (stride 16); a prefill's 3000
  // packed rows; an odd row of 3 bf16 values (6 bytes: 2-byte words).
  for (auto [pool_rows, n, d, column] : {std::tuple<int64_t, int64_t, int64_t, bool>{4096, 8, 128, true},
                                         {4096, 3000, 128, false}, {50, 7, 3, false}}) {
    for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + " n " + std::to_string(n) + " d " +
                   std::to_string(d));
      const at::Tensor k_pool = randn({pool_rows, d}).to(kGpu, t), v_pool = randn({pool_rows, d}).to(kGpu, t);
      const at::Tensor k = randn({n, d}).to(kGpu, t), v = randn({n, d}).to(kGpu, t);
      const at::Tensor picked = at::randperm(pool_rows, at::kLong).narrow(0, 0, n * (column ? 16 : 1));
      const at::Tensor rows = column ? picked.to(kGpu).view({n, 16}).select(1, 5) : picked.to(kGpu);
      ASSERT_TRUE(write_kv_rows_supported(k_pool, v_pool, rows, k, v));
      at::Tensor k_got = k_pool.clone(), v_got = v_pool.clone();
      write_kv_rows(k_got, v_got, rows, k, v);
      EXPECT_TRUE(k_got.equal(k_pool.clone().index_copy_(0, rows, k)));
      EXPECT_TRUE(v_got.equal(v_pool.clone().index_copy_(0, rows, v)));
    }
  }
}

// Quest's summaries after a decode step: the kernel's page against ATen's minimum / maximum
// (a widened page) or k itself (a fresh one), NaNs on both sides; the other pages untouched;
// summaries or a k it cannot take refused.
TEST(TorchGlue, QuestFoldKeyIsAtensMinimumAndMaximumInEveryDtype) {
  KVB_REQUIRE_GPU();
  at::manual_seed(15);
  auto same = [](const at::Tensor& a, const at::Tensor& b) {  // NaN where the other has NaN
    const at::Tensor fa = a.to(at::kFloat), fb = b.to(at::kFloat);
    return fa.isnan().equal(fb.isnan()) && fa.nan_to_num(0).equal(fb.nan_to_num(0));
  };
  for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const bool fresh : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + (fresh ? " fresh" : " widened"));
      const int64_t page = fresh ? 5 : 2;
      at::Tensor lo = randn({8, 6, 128}), hi = randn({8, 6, 128}), k = randn({8, 128});
      lo.view({-1}).narrow(0, 7, 50).fill_(NAN);  // page 0's channels 7..56 of head 0
      lo.select(1, 2).select(0, 3).narrow(0, 0, 4).fill_(NAN);
      k.select(0, 1).narrow(0, 10, 3).fill_(NAN);
      lo = lo.to(kGpu, t), hi = hi.to(kGpu, t), k = k.to(kGpu, t);
      ASSERT_TRUE(quest_fold_key_supported(lo, hi, k, page));
      at::Tensor lo_got = lo.clone(), hi_got = hi.clone();
      quest_fold_key(lo_got, hi_got, k, page, fresh);
      at::Tensor lo_want = lo.to(at::kFloat), hi_want = hi.to(at::kFloat);
      const at::Tensor kf = k.to(at::kFloat);
      lo_want.select(1, page).copy_(fresh ? kf : at::minimum(lo_want.select(1, page), kf));
      hi_want.select(1, page).copy_(fresh ? kf : at::maximum(hi_want.select(1, page), kf));
      EXPECT_TRUE(same(lo_got, lo_want));
      EXPECT_TRUE(same(hi_got, hi_want));
    }
  }
  const at::Tensor lo = randn({2, 3, 8}).to(kGpu), k = randn({2, 8}).to(kGpu);
  EXPECT_FALSE(quest_fold_key_supported(lo, lo, k, 3));                     // page past cap
  EXPECT_FALSE(quest_fold_key_supported(lo, lo, k.to(at::kBFloat16), 0));   // another dtype
  EXPECT_FALSE(quest_fold_key_supported(lo, lo, randn({8, 2}).to(kGpu).t(), 0));  // strided
}

TEST(TorchGlue, RopeRotateHalfGivesAtensBitsInEveryDtype) {
  KVB_REQUIRE_GPU();
  at::manual_seed(12);
  // A decode step's 40 q/k heads of one position; prefill-shaped rows; partial rotary.
  for (auto [heads, L, d, r] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{40, 1, 128, 128},
                                {6, 300, 128, 128}, {3, 5, 64, 32}}) {
    for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + " r " + std::to_string(r));
      const at::Tensor x = (randn({heads, L, d}) * 3).to(kGpu, t);
      const at::Tensor angle = at::rand({L, r / 2}) * 6;
      const at::Tensor cos = at::cat({angle.cos(), angle.cos()}, -1).to(kGpu, t);
      const at::Tensor sin = at::cat({-angle.sin(), angle.sin()}, -1).to(kGpu, t);
      ASSERT_TRUE(rope_rotate_half_supported(x, cos, sin));
      const at::Tensor got = rope_rotate_half(x, cos, sin);
      // ATen's 4 kernels (engine/model/llama_layers' rotate_halves), on the same device.
      const at::Tensor xr = x.narrow(-1, 0, r);
      const at::Tensor swapped = at::cat({xr.narrow(-1, r / 2, r / 2), xr.narrow(-1, 0, r / 2)}, -1);
      const at::Tensor turned = xr * cos + swapped * sin;
      const at::Tensor want = r == d ? turned : at::cat({turned, x.narrow(-1, r, d - r)}, -1);
      EXPECT_TRUE(got.equal(want));
    }
  }
}

TEST(TorchGlue, QuestPageScoresPerHeadAndSummedOverTheGroup) {
  KVB_REQUIRE_GPU();
  at::manual_seed(1);
  const int64_t H = 4, g = 4, P = 300, d = 64, cap = 400;
  at::Tensor a = randn({H, cap, d}), b = randn({H, cap, d});
  // Summaries in a preallocated buffer: a narrow, heads cap*d floats apart, used in place.
  at::Tensor lo = at::minimum(a, b), hi = at::maximum(a, b);
  at::Tensor q = randn({H, g, d});
  at::Tensor want = quest_reference(q, lo.narrow(1, 0, P), hi.narrow(1, 0, P));  // [H, g, P]
  at::Tensor lo_gpu = lo.to(kGpu).narrow(1, 0, P), hi_gpu = hi.to(kGpu).narrow(1, 0, P);
  ASSERT_TRUE(quest_page_scores_supported(lo_gpu, hi_gpu));
  expect_close(quest_page_scores(q.to(kGpu), lo_gpu, hi_gpu, false), want);
  expect_close(quest_page_scores(q.to(kGpu), lo_gpu, hi_gpu, true), want.sum(1, true));
  // bf16 queries are widened to fp32, as the CPU adapter does.
  at::Tensor q16 = q.to(at::kBFloat16);
  expect_close(quest_page_scores(q16.to(kGpu), lo_gpu, hi_gpu, false),
               quest_reference(q16, lo.narrow(1, 0, P), hi.narrow(1, 0, P)));
  // Summaries in a 16-bit dtype (Quest keeps the keys' dtype on a GPU) are read widened: the
  // scores of their fp32 values.
  for (const at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(std::string(c10::toString(type)));
    at::Tensor lo16 = lo.to(type), hi16 = hi.to(type);
    at::Tensor lo16_gpu = lo16.to(kGpu).narrow(1, 0, P), hi16_gpu = hi16.to(kGpu).narrow(1, 0, P);
    ASSERT_TRUE(quest_page_scores_supported(lo16_gpu, hi16_gpu));
    EXPECT_FALSE(quest_page_scores_supported(lo_gpu, hi16_gpu));  // dtypes differ
    at::Tensor want16 = quest_reference(q, lo16.narrow(1, 0, P).to(at::kFloat),
                                        hi16.narrow(1, 0, P).to(at::kFloat));
    expect_close(quest_page_scores(q.to(kGpu), lo16_gpu, hi16_gpu, false), want16);
    expect_close(quest_page_scores(q.to(kGpu), lo16_gpu, hi16_gpu, true), want16.sum(1, true));
  }
}

// A fold in the scoring's launch: the summaries' last page as ATen's minimum and maximum (or
// a copy, fresh) of the key at each head's pool row leave it, in bf16, the other pages
// untouched, and the scores are those of the folded summaries. Rows: a column of a row table.
TEST(TorchGlue, QuestPageScoresFoldTheKeyAsAtensMinimumAndMaximum) {
  KVB_REQUIRE_GPU();
  at::manual_seed(5);
  const int64_t H = 8, g = 4, P = 90, d = 128, cap = 120, R = 64;
  for (const bool fresh : {false, true}) {
    SCOPED_TRACE(fresh ? "fresh" : "widened");
    const at::Tensor a = randn({H, cap, d}), b = randn({H, cap, d});
    const at::Tensor lo = at::minimum(a, b).to(at::kBFloat16), hi = at::maximum(a, b).to(at::kBFloat16);
    const at::Tensor pool = randn({R, d}).to(at::kBFloat16);
    const at::Tensor table = at::randint(0, R, {H, 10}, at::kLong);
    const at::Tensor rows = table.select(1, 6);  // [H], a stride of 10
    at::Tensor want_lo = lo.clone(), want_hi = hi.clone();
    const at::Tensor key = pool.index_select(0, rows);  // [H, d]
    at::Tensor page_lo = want_lo.select(1, P - 1), page_hi = want_hi.select(1, P - 1);
    page_lo.copy_(fresh ? key : at::minimum(page_lo, key));
    page_hi.copy_(fresh ? key : at::maximum(page_hi, key));
    const at::Tensor q = randn({H, g, d});
    const at::Tensor want = quest_reference(q, want_lo.narrow(1, 0, P).to(at::kFloat),
                                            want_hi.narrow(1, 0, P).to(at::kFloat));
    const at::Tensor lo_gpu = lo.to(kGpu), hi_gpu = hi.to(kGpu);
    const QuestFoldArgs fold{pool.to(kGpu), table.to(kGpu).select(1, 6), P - 1, fresh};
    ASSERT_TRUE(quest_fold_in_scores_supported(q.to(kGpu), lo_gpu.narrow(1, 0, P),
                                               hi_gpu.narrow(1, 0, P), fold));
    expect_close(quest_page_scores(q.to(kGpu), lo_gpu.narrow(1, 0, P), hi_gpu.narrow(1, 0, P),
                                   false, &fold),
                 want);
    EXPECT_TRUE(at::equal(lo_gpu.to(at::kCPU), want_lo));
    EXPECT_TRUE(at::equal(hi_gpu.to(at::kCPU), want_hi));
    // Not taken: a pool of another dtype, a page past P.
    EXPECT_FALSE(quest_fold_in_scores_supported(
        q.to(kGpu), lo_gpu.narrow(1, 0, P), hi_gpu.narrow(1, 0, P),
        QuestFoldArgs{pool.to(at::kFloat).to(kGpu), fold.rows, P - 1, fresh}));
    EXPECT_FALSE(quest_fold_in_scores_supported(q.to(kGpu), lo_gpu.narrow(1, 0, P),
                                                hi_gpu.narrow(1, 0, P),
                                                QuestFoldArgs{fold.pool, fold.rows, P, fresh}));
  }
}

TEST(TorchGlue, QuestPageScoresSplitsGroupsBeyondSharedMemory) {
  KVB_REQUIRE_GPU();
  at::manual_seed(2);
  const int64_t H = 2, g = 100, P = 70, d = 128;  // g * d = 12800 floats: two launches
  at::Tensor a = randn({H, P, d}), b = randn({H, P, d}), q = randn({H, g, d});
  at::Tensor lo = at::minimum(a, b), hi = at::maximum(a, b);
  at::Tensor want = quest_reference(q, lo, hi);
  expect_close(quest_page_scores(q.to(kGpu), lo.to(kGpu), hi.to(kGpu), false), want);
  expect_close(quest_page_scores(q.to(kGpu), lo.to(kGpu), hi.to(kGpu), true), want.sum(1, true));
  // bf16 queries over several launches: read as they are, widened; fp32 parts and result.
  const at::Tensor q16 = q.to(at::kBFloat16);
  expect_close(quest_page_scores(q16.to(kGpu), lo.to(kGpu), hi.to(kGpu), true),
               quest_reference(q16, lo, hi).sum(1, true));
}

// q [H, g, m*s], centroids [H, m, K, s], codes [H, m, n] -> [H, g, n].
at::Tensor pq_reference(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes) {
  const int64_t H = centroids.size(0), m = centroids.size(1), K = centroids.size(2),
                s = centroids.size(3), g = q.size(1), n = codes.size(2);
  at::Tensor table = (q.view({H, g, m, 1, s}) * centroids.view({H, 1, m, K, s})).sum(-1);  // [H, g, m, K]
  at::Tensor idx = codes.to(at::kLong).view({H, 1, m, n}).expand({H, g, m, n});
  return table.gather(3, idx).sum(2);                                                     // [H, g, n]
}

TEST(TorchGlue, PqScoresMatchTheTableLookup) {
  KVB_REQUIRE_GPU();
  at::manual_seed(3);
  // Second case: a table [g, m, K] of 16384 floats, beyond shared memory: split over launches.
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {{4, 8, 64}, {8, 8, 256}};
  for (const auto& [g, m, K] : shapes) {
    SCOPED_TRACE("g " + std::to_string(g) + " m " + std::to_string(m) + " K " + std::to_string(K));
    const int64_t H = 2, s = 16, n = 1000;
    at::Tensor q = randn({H, g, m * s}), centroids = randn({H, m, K, s});
    at::Tensor codes = at::randint(0, K, {H, m, n}, at::kLong);  // any integer dtype
    ASSERT_TRUE(pq_scores_supported(centroids.to(kGpu)));
    const at::Tensor got = pq_scores(q.to(kGpu), centroids.to(kGpu), codes.to(kGpu));
    expect_close(got, pq_reference(q, centroids, codes));
    // PQCache's 1 / sqrt(d) applied in the kernel: the bits of ATen's product after it.
    const double scale = 1.0 / std::sqrt(128.0);
    EXPECT_TRUE(pq_scores(q.to(kGpu), centroids.to(kGpu), codes.to(kGpu), scale)
                    .equal(got * scale));
    // uint8 codes: the leading n columns of a wider index, read in place.
    at::Tensor wide = at::randint(0, K, {H, m, n + 50}, at::kLong).to(at::kByte);
    expect_close(pq_scores(q.to(kGpu), centroids.to(kGpu), wide.to(kGpu).narrow(2, 0, n)),
                 pq_reference(q, centroids, wide.narrow(2, 0, n)));
    // bf16 queries are read as they are, widened (the split launches' parts stay fp32).
    const at::Tensor q16 = q.to(at::kBFloat16);
    const at::Tensor got16 = pq_scores(q16.to(kGpu), centroids.to(kGpu), codes.to(kGpu));
    EXPECT_EQ(got16.scalar_type(), at::kFloat);
    expect_close(got16, pq_reference(q16.to(at::kFloat), centroids, codes));
  }
}

// PQCache's selection through the glue: with one query head a token's weight grows with its
// score, so the entries are those of the k best scores by ATen's stable sort (tokens of equal
// codes tie: the lower index first), between the lead and trailing entries. Codes as int64 or
// as uint8 read in place (a narrow of a wider index), one launch or sliced, bf16 queries (read
// widened): the same entries, for one and for four query heads.
TEST(TorchGlue, PqTopKTakesTheBestScoresWhateverTheLayout) {
  KVB_REQUIRE_GPU();
  at::manual_seed(16);
  const int64_t H = 3, m = 2, K = 16, s = 8, n = 2000, lead = 4, trailing = 5;
  const double scale = 0.25;
  const at::Tensor centroids = randn({H, m, K, s}), centroids_gpu = centroids.to(kGpu);
  const at::Tensor wide = at::randint(0, K, {H, m, n + 30}, at::kLong);
  const at::Tensor codes = wide.narrow(2, 0, n);                        // [H, m, n]
  const at::Tensor codes_gpu = codes.contiguous().to(kGpu);
  const at::Tensor codes8_gpu = wide.to(at::kByte).to(kGpu).narrow(2, 0, n);  // row stride n + 30
  const at::Tensor ends =
      at::cat({at::arange(lead), at::arange(lead + n, lead + n + trailing)}).expand({H, -1});
  for (const int64_t g : {int64_t(1), int64_t(4)}) {
    const at::Tensor q = randn({H, g, m * s}), q_gpu = q.to(kGpu);
    for (const int64_t k : {int64_t(0), int64_t(1), int64_t(100), n}) {
      SCOPED_TRACE("g " + std::to_string(g) + ", k " + std::to_string(k));
      const at::Tensor got = pq_top_k(q_gpu, centroids_gpu, codes_gpu, scale, k, lead, trailing, 1);
      ASSERT_EQ(got.sizes(), (std::vector<int64_t>{H, lead + k + trailing}));
      EXPECT_TRUE(at::cat({got.narrow(1, 0, lead), got.narrow(1, lead + k, trailing)}, 1)
                      .cpu()
                      .equal(ends));
      if (g == 1) {
        const at::Tensor scores = pq_reference(q, centroids, codes).squeeze(1);  // [H, n]
        const at::Tensor order = std::get<1>(scores.sort(true, -1, true));
        const at::Tensor want = std::get<0>(order.narrow(1, 0, k).sort(-1)) + lead;
        EXPECT_TRUE(got.narrow(1, lead, k).cpu().equal(want));
      }
      for (const int64_t slices : {int64_t(3), kAutoSlices})
        EXPECT_TRUE(pq_top_k(q_gpu, centroids_gpu, codes8_gpu, scale, k, lead, trailing, slices)
                        .equal(got))
            << slices << " slices";
      const at::Tensor q16 = q_gpu.to(at::kBFloat16);
      EXPECT_TRUE(pq_top_k(q16, centroids_gpu, codes_gpu, scale, k, lead, trailing)
                      .equal(pq_top_k(q16.to(at::kFloat), centroids_gpu, codes_gpu, scale, k,
                                      lead, trailing)));
    }
  }
}

// PQCache's codes of keys leaving the window: each the nearest centroid of its sub-vector, by
// a brute force in double here (a pick within fp32 rounding of the nearest is allowed, and
// nearly all picks must be it), the keys read in place through a strided view of a row table,
// in every pool dtype, K a multiple of a warp and not; the other columns untouched.
TEST(TorchGlue, PqEncodeWritesEachKeysNearestCentroid) {
  KVB_REQUIRE_GPU();
  at::manual_seed(8);
  const int64_t H = 8, m = 2, s = 64, n = 37, column = 5, width = column + n + 3;
  for (const int64_t K : {int64_t(64), int64_t(200)})
    for (const at::ScalarType type : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE("K " + std::to_string(K) + ", " + std::string(c10::toString(type)));
      const at::Tensor centroids = randn({H, m, K, s});
      const at::Tensor pool = randn({4096, m * s}).to(type);
      const at::Tensor table = at::randperm(4096).view({H, 512});  // [H, 512] pool rows
      const at::Tensor rows = table.to(kGpu).narrow(1, 100, n);     // row stride 512
      at::Tensor codes = at::full({H, m, width}, 255, at::kByte).to(kGpu);
      ASSERT_TRUE(pq_encode_supported(centroids.to(kGpu), pool.to(kGpu), rows, codes));
      pq_encode(centroids.to(kGpu), pool.to(kGpu), rows, codes, column);
      const at::Tensor got = codes.to(at::kCPU, at::kLong);  // [H, m, width]
      const at::Tensor x = pool.to(at::kDouble)
                               .index_select(0, table.narrow(1, 100, n).reshape({-1}))
                               .view({H, n, m, 1, s})
                               .permute({0, 2, 1, 3, 4});                     // [H, m, n, 1, s]
      const at::Tensor dist = (x - centroids.to(at::kDouble).unsqueeze(2)).pow(2).sum(-1);  // [H, m, n, K]
      const at::Tensor best = std::get<0>(dist.min(-1));                              // [H, m, n]
      const at::Tensor picked = dist.gather(3, got.narrow(2, column, n).unsqueeze(-1)).squeeze(-1);
      EXPECT_LE(((picked - best) / (best + 1)).max().item<double>(), 1e-5);
      EXPECT_GE(got.narrow(2, column, n).eq(std::get<1>(dist.min(-1))).to(at::kDouble).mean().item<double>(), 0.99);
      EXPECT_TRUE(got.narrow(2, 0, column).eq(255).all().item<bool>());
      EXPECT_TRUE(got.narrow(2, column + n, 3).eq(255).all().item<bool>());
    }
}

TEST(TorchGlue, CentroidUpdateMatchesAten) {
  KVB_REQUIRE_GPU();
  at::manual_seed(4);
  const int64_t H = 3, n = 2000, C = 50, d = 64;
  at::Tensor keys = randn({H, n, d}), centroids = randn({H, C, d}) * 3;
  at::Tensor labels = at::randint(0, C, {H, n}, at::kInt).to(kGpu);  // [H, n]
  at::Tensor l = labels.to(at::kCPU, at::kLong);
  at::Tensor sums = at::zeros({H, C, d}).scatter_add_(1, l.unsqueeze(-1).expand({H, n, d}), keys);
  at::Tensor counts = at::zeros({H, C}).scatter_add_(1, l, at::ones({H, n}));
  at::Tensor want = at::where((counts > 0).unsqueeze(-1), sums / counts.clamp_min(1).unsqueeze(-1),
                              centroids);
  at::Tensor got_counts;
  expect_close(centroid_update(keys.to(kGpu), labels, centroids.to(kGpu), &got_counts), want);
  EXPECT_TRUE(at::equal(got_counts.to(at::kCPU, at::kFloat), counts));
  // C * (d + 1) beyond 48 KiB of shared memory: the global-memory path, one empty cluster.
  const int64_t big_C = 400;
  at::Tensor big = randn({H, big_C, d});
  at::Tensor big_labels = at::randint(0, big_C - 1, {H, n}, at::kInt);  // cluster big_C-1 empty
  at::Tensor bl = big_labels.to(at::kLong);
  at::Tensor bsums = at::zeros({H, big_C, d}).scatter_add_(1, bl.unsqueeze(-1).expand({H, n, d}), keys);
  at::Tensor bcounts = at::zeros({H, big_C}).scatter_add_(1, bl, at::ones({H, n}));
  expect_close(centroid_update(keys.to(kGpu), big_labels.to(kGpu), big.to(kGpu)),
               at::where((bcounts > 0).unsqueeze(-1), bsums / bcounts.clamp_min(1).unsqueeze(-1), big));
}

// The tensor-core assignment against ATen's bmm and argmax (the adapter's path for fp32 keys
// and its reference), the similarities rounded to the keys' dtype: the same labels but where
// two centroids' rounded
// similarities tie or nearly do (the sums' order differs), and there each label within a
// rounding of the best fp32 similarity. 16-bit keys only; fp32 and d = 72 refused.
TEST(TorchGlue, CosineAssignIsAtensBmmAndArgmaxInBf16AndF16) {
  KVB_REQUIRE_GPU();
  at::manual_seed(8);
  const int64_t H = 3, n = 700, C = 70, d = 128;
  const at::Tensor keys = randn({H, n, d}), centroids = randn({H, C, d}) * 2;
  for (const at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(type == at::kBFloat16 ? "bf16" : "f16");
    const at::Tensor k = keys.to(type);
    at::Tensor cn = centroids / centroids.norm(2, -1, /*keepdim=*/true);
    cn = cn.to(type);
    // fp32 sums rounded to the type, as a bmm in that type writes them (the CPU's LibTorch
    // has no f16 bmm)
    const at::Tensor sims = at::bmm(k.to(at::kFloat), cn.to(at::kFloat).transpose(1, 2));  // [H, n, C]
    const at::Tensor want = sims.to(type).argmax(-1);  // [H, n]
    const at::Tensor got = cosine_assign(k.to(kGpu), cn.to(kGpu)).to(at::kCPU);
    ASSERT_EQ(got.sizes(), want.sizes());
    ASSERT_EQ(got.scalar_type(), at::kLong);
    const double agree = got.eq(want).to(at::kDouble).mean().item<double>();
    EXPECT_GT(agree, 0.98);
    const at::Tensor best = std::get<0>(sims.max(-1));
    const at::Tensor picked = sims.gather(2, got.unsqueeze(-1)).squeeze(-1);
    EXPECT_LE((best - picked).max().item<double>(), 1.0 / 64) << "a label far from the best";
  }
  EXPECT_FALSE(cosine_assign_supported(keys.to(kGpu), centroids.to(kGpu)));  // fp32 keys
  EXPECT_FALSE(cosine_assign_supported(randn({1, 4, 72}).to(at::kBFloat16).to(kGpu),
                                       randn({1, 2, 72}).to(kGpu)));
}

// top_pages in two launches (chunks of pages, each keeping its best, then a block per row over
// those) gives the entries of one block per row (which Gpu.QuestTopPagesOnTheKernelMatchAten
// and Gpu.PqcacheTopKOnTheKernelIsAtensAndTiesGoLow hold to ATen's): chunks of one page, of
// fewer pages than are taken, a last chunk shorter than the others, one chunk for the whole
// row; scores with ties across chunks (small integers, zeros of both signs), NaNs (ranked
// first, as ATen's sort ranks them); pages of one entry (PQCache) and of 16 (Quest).
TEST(TorchGlue, TopPagesInChunksGiveTheEntriesOfOneBlockPerRow) {
  KVB_REQUIRE_GPU();
  at::manual_seed(12);
  for (const int64_t pages : {int64_t(1), int64_t(5), int64_t(300), int64_t(4097), int64_t(20000)})
    for (const int ties : {0, 1, 2, 3}) {  // none, small integers, zeros, some NaNs
      const at::Tensor raw = randn({3, pages + 2});  // [rows, P]
      at::Tensor scores = ties == 1   ? (raw * 2).round()
                          : ties == 2 ? at::zeros_like(raw) * at::sign(raw)
                                      : raw.clone();
      if (ties == 3) scores.masked_fill_(randn({3, pages + 2}) > 1.5, NAN);
      const at::Tensor on_gpu = scores.to(kGpu);
      for (const int64_t page_size : {int64_t(1), int64_t(16)})
        for (const auto& [whole, part] : std::vector<std::pair<int64_t, int64_t>>{
                 {1, 0}, {0, page_size - 1}, {std::min<int64_t>(pages, 40), 0},
                 {std::min<int64_t>(pages - 1, 63), page_size > 1 ? 7 : 0}, {pages, 0}}) {
          if (whole + (part > 0 ? 1 : 0) > pages || whole + part == 0) continue;
          const int64_t n = pages * page_size + 5, lead = page_size == 1 ? 32 : 0;
          const at::Tensor one_block = top_pages(on_gpu, pages, whole, part, page_size, n, lead, 0);
          for (const int64_t chunk : {int64_t(1), int64_t(7), int64_t(256), int64_t(4096),
                                      pages, kAutoChunk}) {
            if (chunk > 0 && pages / chunk > kMostBlocks) continue;  // blocks per row
            EXPECT_TRUE(top_pages(on_gpu, pages, whole, part, page_size, n, lead, chunk)
                            .equal(one_block))
                << pages << " pages of " << page_size << ", ties " << ties << ", whole " << whole
                << ", part " << part << ", chunk " << chunk;
          }
        }
    }
}

// Under a device limit (InfiniGen's fetch count: pages of one entry, trailing entries) a row
// takes its best min(whole, limit - trailing) entries, then the trailing ones, then repeats its
// last entry up to the width: the entries of the call without a limit that takes that many
// (held to ATen by the tests above and Gpu.QuestTopPagesOnTheKernelMatchAten), padded. Limits
// below the trailing entries, at each edge of `whole`, and far above; one block per row and
// chunks.
TEST(TorchGlue, TopPagesUnderALimitTakeTheBestThatFitThenRepeatTheLast) {
  KVB_REQUIRE_GPU();
  at::manual_seed(15);
  const int64_t rows = 3, whole = 40;
  for (const int64_t n : {int64_t(100), int64_t(5000)})
    for (const int64_t trailing : {int64_t(1), int64_t(9)}) {
      const int64_t pages = n - trailing;
      const at::Tensor scores = randn({rows, n}).to(kGpu);  // [rows, P]
      for (const int64_t limit : {int64_t(0), int64_t(1), trailing, trailing + 1, trailing + 17,
                                  whole + trailing - 1, whole + trailing, int64_t(100000)}) {
        const int64_t fits = std::clamp<int64_t>(limit - trailing, 0, whole);
        const at::Tensor taken = top_pages(scores, pages, fits, 0, 1, n);  // [rows, fits + trailing]
        const at::Tensor want = at::cat(
            {taken, taken.narrow(1, fits + trailing - 1, 1).expand({rows, whole - fits})}, 1);
        for (const int64_t chunk : {int64_t(0), int64_t(1024), kAutoChunk}) {
          const at::Tensor got = top_pages(scores, pages, whole, 0, 1, n, 0, chunk,
                                           at::full({}, limit, at::kLong).to(kGpu));
          EXPECT_TRUE(got.equal(want)) << "n " << n << ", trailing " << trailing << ", limit "
                                       << limit << ", chunk " << chunk;
        }
      }
    }
  const at::Tensor scores = randn({2, 9}).to(kGpu), limit = at::full({}, 3, at::kLong).to(kGpu);
  EXPECT_THROW(top_pages(scores, 9, 2, 0, 1, 9, 0, 0, limit), std::invalid_argument);  // none trailing
  EXPECT_THROW(top_pages(scores, 4, 2, 0, 2, 9, 0, 0, limit), std::invalid_argument);  // pages of 2
  EXPECT_THROW(top_pages(scores, 8, 2, 0, 1, 9, 0, 0, limit.to(at::kInt)), std::invalid_argument);
}

TEST(TorchGlue, RefusesWhatItDoesNotTake) {
  KVB_REQUIRE_GPU();
  at::Tensor lo = randn({2, 8, 16}), q = randn({2, 4, 16});
  if (kRefusesHostTensors) {
    EXPECT_FALSE(quest_page_scores_supported(lo, lo));  // CPU summaries
    EXPECT_THROW(quest_page_scores(q, lo, lo, true), std::invalid_argument);
  }
  EXPECT_THROW(quest_page_scores(randn({2, 4, 8}).to(kGpu), lo.to(kGpu), lo.to(kGpu), true),
               std::invalid_argument);  // d differs
  EXPECT_FALSE(pq_scores_supported(randn({2, 2, 300, 8}).to(kGpu)));  // K > 256
  const at::Tensor ints = at::zeros({2, 3}, at::kInt).to(kGpu), cluster_scores = randn({2, 3}).to(kGpu);
  EXPECT_TRUE(cluster_rows_supported(cluster_scores, ints, ints, ints, 100));
  EXPECT_FALSE(cluster_rows_supported(cluster_scores, ints.to(at::kLong), ints, ints, 100));
  EXPECT_FALSE(cluster_rows_supported(cluster_scores, ints, ints, ints, int64_t(1) << 40));  // bitmap
  EXPECT_THROW(cluster_rows(cluster_scores, ints, ints, ints, 4, 0, 50, 100, {}, 0, 0, {}),
               std::invalid_argument);  // taken > N
  EXPECT_THROW(cluster_rows(cluster_scores, ints, ints, ints, 1, 60, 50, 100, {}, 0, 0, {}),
               std::invalid_argument);  // sinks past the recent entries
  EXPECT_THROW(cluster_rows(cluster_scores, ints, ints, ints, 1, 0, 50, 100,
                            at::zeros({2, 99}, at::kLong).to(kGpu), 0, 0,
                            at::zeros({}, at::kLong).to(kGpu)),
               std::invalid_argument);  // a step table narrower than the entries
  const at::Tensor scores = randn({2, 9}).to(kGpu);  // [rows, P]
  EXPECT_FALSE(top_pages_supported(scores.to(at::kBFloat16)));
  EXPECT_FALSE(top_pages_supported(randn({9, 2}).to(kGpu).t()));  // channels not adjacent
  EXPECT_THROW(top_pages(scores, 8, 2, 16, 16, 130), std::invalid_argument);  // part = page
  EXPECT_THROW(top_pages(scores, 8, 8, 1, 16, 130), std::invalid_argument);   // 9 pages of 8
  EXPECT_THROW(top_pages(scores, 8, 2, 0, 16, 127), std::invalid_argument);   // n in a page
  EXPECT_THROW(top_pages(scores, 8, 2, 0, 16, 145, -1), std::invalid_argument);  // lead < 0
  EXPECT_THROW(top_pages(scores, 10, 2, 0, 16, 161), std::invalid_argument);  // pages > P
  EXPECT_THROW(top_pages(scores, 8, 2, 0, 16, 129, 0, -2), std::invalid_argument);  // chunk
}

}  // namespace
}  // namespace kvb::cuda
