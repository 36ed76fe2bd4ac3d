// engine/kernel_adapter.h: the CPU K-means kernels it picks for fp32 CPU inputs agree with its
// ATen path (Quest's and PQ's paths are compared in the methods' tests); the RMSNorm kernel
// agrees with transformers' formula in ATen.
#include "engine/kernel_adapter.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace kvb {
namespace {

TEST(KernelAdapter, CosineAssignOnTheCpuKernelMatchesAten) {
  at::manual_seed(3);
  const at::Tensor keys = at::randn({2, 300, 16}), centroids = at::randn({2, 7, 16});
  const at::Tensor kernel = cosine_assign(keys, centroids);
  const at::Tensor aten = cosine_assign(keys, centroids, KernelPath::kAten);
  ASSERT_EQ(kernel.scalar_type(), at::kLong);
  ASSERT_EQ(kernel.sizes(), aten.sizes());
  // Random keys have no near ties at this size: every label agrees.
  EXPECT_TRUE(kernel.equal(aten));
}

// The ATen assignment in chunks of 7 keys (43 of them, the last of 6) gives one block's labels.
TEST(KernelAdapter, CosineAssignInChunksGivesOneBlocksLabels) {
  at::manual_seed(4);
  const at::Tensor keys = at::randn({2, 300, 16}), centroids = at::randn({2, 7, 16});
  const at::Tensor whole = cosine_assign(keys, centroids, KernelPath::kAten, 2 * 300 * 7);
  const at::Tensor chunked = cosine_assign(keys, centroids, KernelPath::kAten, 2 * 7 * 7);
  ASSERT_EQ(chunked.sizes(), whole.sizes());
  EXPECT_TRUE(chunked.equal(whole));
  EXPECT_TRUE(whole.equal(cosine_assign(keys, centroids)));  // the CPU kernel's, no near ties
  // A block smaller than one key's similarities still takes a key at a time.
  EXPECT_TRUE(cosine_assign(keys, centroids, KernelPath::kAten, 1).equal(whole));
}

// PQCache's codes of pool rows, against a brute-force nearest centroid: rows a strided view (a
// block table's columns), written at a column offset, other columns untouched; uint8 and int64.
TEST(KernelAdapter, PqEncodeRowsWritesEachKeysNearestCentroids) {
  at::manual_seed(5);
  const int64_t H = 2, m = 2, K = 5, s = 3, n = 4, column = 3;
  const at::Tensor centroids = at::randn({H, m, K, s});
  const at::Tensor pool = at::randn({40, m * s});
  const at::Tensor table = at::randperm(40).view({H, 20});  // [H, 20] pool rows
  const at::Tensor rows = table.narrow(1, 5, n);             // [H, n], row stride 20
  for (const at::ScalarType type : {at::kByte, at::kLong}) {
    at::Tensor codes = at::full({H, m, column + n + 2}, 7, at::TensorOptions().dtype(type));
    pq_encode_rows(centroids, pool, rows, codes, column);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t u = 0; u < m; ++u) {
        for (int64_t j = 0; j < n; ++j) {
          const at::Tensor x = pool[rows[h][j].item<int64_t>()].narrow(0, u * s, s);
          const at::Tensor dist = (centroids[h][u] - x).pow(2).sum(-1);  // [K]
          EXPECT_EQ(codes[h][u][column + j].item<int64_t>(), dist.argmin().item<int64_t>());
        }
        for (const int64_t other : {int64_t(0), int64_t(1), int64_t(2), column + n, column + n + 1})
          EXPECT_EQ(codes[h][u][other].item<int64_t>(), 7);
      }
  }
  at::Tensor small = at::zeros({H, m, 2}, at::kByte);
  EXPECT_THROW(pq_encode_rows(centroids, pool, rows, small, 0), std::logic_error);
}

// top_page_entries by hand: page scores 3, 1, 2, 2 rank pages 0, 2, 3, 1 (the tie to the lower
// page); two whole pages, the next one's first 5 entries, then the current page's 3.
TEST(KernelAdapter, TopPageEntriesTakesRankedPagesThenTheTrimmedOneThenTheCurrentOne) {
  const at::Tensor scores = at::tensor({3.f, 1.f, 2.f, 2.f, 9.f}).view({1, 5});  // [1, P]
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 16; ++i) want.push_back(i);       // page 0
  for (int64_t i = 32; i < 48; ++i) want.push_back(i);      // page 2
  for (int64_t i = 48; i < 53; ++i) want.push_back(i);      // page 3, 5 entries
  for (int64_t i = 64; i < 67; ++i) want.push_back(i);      // the current page
  const at::Tensor got = top_page_entries(scores, 4, 2, 5, 16, 67);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, int64_t(want.size())}));
  EXPECT_EQ(std::vector<int64_t>(got.data_ptr<int64_t>(), got.data_ptr<int64_t>() + got.numel()),
            want);
  // No page but the current one; a trimmed page alone; no current entries (PQCache's use).
  EXPECT_TRUE(top_page_entries(scores, 0, 0, 0, 16, 3).equal(at::arange(3).view({1, 3})));
  EXPECT_TRUE(top_page_entries(scores, 4, 0, 2, 16, 65).equal(at::tensor({0L, 1L, 64L}).view({1, 3})));
  // Trailing entries past one page (PQCache's window): pages 0 and 2, then 64 .. 80.
  const at::Tensor long_tail = top_page_entries(scores, 4, 2, 0, 16, 81);
  ASSERT_EQ(long_tail.size(1), 16 + 16 + 17);
  EXPECT_TRUE(long_tail[0].narrow(0, 32, 17).equal(at::arange(64, 81)));
  // Ties at the k-th score to the lower indices, NaN above every number, -0 equal to +0, row
  // by row (hand-computed), on the CPU kernel and on ATen's operators.
  const at::Tensor tied = at::tensor({1.f, 3.f, 2.f, 3.f, 2.f, 2.f, NAN, 0.f, -0.f, 5.f,
                                      -1.f, 0.f, 4.f, -0.f, 4.f}).view({3, 5});
  for (const KernelPath path : {KernelPath::kAuto, KernelPath::kAten}) {
    EXPECT_TRUE(top_k_ascending(scores, 2, 0, 0, path).equal(at::tensor({0L, 4L}).view({1, 2})));
    EXPECT_TRUE(top_k_ascending(tied, 3, 0, 0, path).equal(
        at::tensor({1L, 2L, 3L, 0L, 1L, 4L, 1L, 2L, 4L}).view({3, 3})));
    EXPECT_TRUE(top_k_ascending(tied, 2, 0, 0, path).equal(
        at::tensor({1L, 3L, 1L, 4L, 2L, 4L}).view({3, 2})));
    EXPECT_TRUE(top_k_ascending(tied, 0, 1, 1, path).equal(at::tensor({0L, 6L}).expand({3, 2})));
    // PQCache's rows: sinks 0..2, then 3 + the top-2 of 5 candidates, then 3 + 5 .. 3 + 5 + 1.
    EXPECT_TRUE(top_k_ascending(scores, 2, 3, 2, path).equal(
        at::tensor({0L, 1L, 2L, 3L, 7L, 8L, 9L}).view({1, 7})));
  }
  // Out of contract: current entries before the last page's end, a trimmed page as long as a
  // page, more pages than there are, k > n, a negative lead or trailing count.
  EXPECT_THROW(top_page_entries(scores, 4, 2, 0, 16, 63), std::logic_error);
  EXPECT_THROW(top_page_entries(scores, 4, 2, 16, 16, 67), std::logic_error);
  EXPECT_THROW(top_page_entries(scores, 4, 4, 1, 16, 67), std::logic_error);
  EXPECT_THROW(top_k_ascending(scores, 6, 0, 0), std::logic_error);
  EXPECT_THROW(top_k_ascending(scores, 2, -1, 0), std::logic_error);
  EXPECT_THROW(top_k_ascending(scores, 2, 0, -1), std::logic_error);
}

// The CPU top-k kernel against ATen's operators on rows with many ties (small integers), NaNs
// and zeros of both signs, every k from none to all, rows read in place from a wider tensor.
TEST(KernelAdapter, TopKAscendingOnTheCpuKernelIsAtens) {
  at::manual_seed(9);
  const int64_t rows = 5, n = 300;
  at::Tensor scores = (at::randn({rows, n + 7}) * 2).round();  // [rows, n + 7]
  scores.masked_fill_(at::rand({rows, n + 7}) > 0.9, NAN);
  scores.masked_fill_(at::rand({rows, n + 7}) > 0.9, -0.f);
  const at::Tensor view = scores.narrow(1, 3, n);  // rows n + 7 apart
  for (const int64_t k : {int64_t(0), int64_t(1), int64_t(17), int64_t(150), n - 1, n})
    EXPECT_TRUE(top_k_ascending(view, k, 2, 3).equal(
        top_k_ascending(view, k, 2, 3, KernelPath::kAten))) << k;
}

TEST(KernelAdapter, ClusterMeansOnTheCpuKernelMatchesAtenAndKeepsEmptyClusters) {
  at::manual_seed(4);
  const at::Tensor keys = at::randn({2, 50, 8}), old = at::randn({2, 5, 8});
  const at::Tensor labels = at::randint(0, 4, {2, 50}, at::kLong);  // cluster 4 stays empty
  const at::Tensor kernel = cluster_means(keys, labels, old);
  const at::Tensor aten = cluster_means(keys, labels, old, KernelPath::kAten);
  EXPECT_TRUE(at::allclose(kernel, aten, 1e-5, 1e-6));
  EXPECT_TRUE(kernel.select(1, 4).equal(old.select(1, 4)));
  // Cluster 0 of head 1 by hand: the mean of its members.
  const at::Tensor members = keys[1].index({labels[1] == 0});
  EXPECT_TRUE(at::allclose(kernel[1][0], members.mean(0), 1e-5, 1e-6));
}

// The ATen operators `f` calls on this thread from outside another operator, by name.
std::vector<std::string> aten_calls(const std::function<void()>& f) {
  static thread_local std::vector<std::string>* names = nullptr;
  static thread_local int depth = 0;
  std::vector<std::string> seen;
  names = &seen;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (depth++ == 0) names->push_back(fn.name());
            return nullptr;
          },
          [](const at::RecordFunction&, at::ObserverContext*) { --depth; })
          .scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
  names = nullptr;
  return seen;
}

// transformers' LlamaRMSNorm, op by op (in fp32 at least: f64 stays f64).
at::Tensor rms_norm_as_transformers(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor xf = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  return (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * w;
}

TEST(KernelAdapter, RmsNormKernelMatchesTransformersFormulaInFp32AndBf16) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({3, 5, 256}) * 4, w = at::randn({256});
  ASSERT_TRUE(rms_norm_supported(x, w));  // the kernel, not ATen again
  EXPECT_TRUE(at::allclose(inference_rms_norm(x, w, 1e-5), rms_norm_as_transformers(x, w, 1e-5),
                           1e-6, 1e-6));
  const at::Tensor xb = x.to(at::kBFloat16), wb = w.to(at::kBFloat16);
  ASSERT_TRUE(rms_norm_supported(xb, wb));
  at::Tensor kernel;
  EXPECT_EQ(aten_calls([&] { kernel = inference_rms_norm(xb, wb, 1e-5); }),
            std::vector<std::string>{"aten::empty_like"});  // the kernel, not ATen's 8
  const at::Tensor aten = rms_norm_as_transformers(xb, wb, 1e-5);
  ASSERT_EQ(kernel.scalar_type(), at::kBFloat16);
  // The same two roundings of fp32 values a few fp32 ulps apart: the same bf16 bits but where
  // a value sits on a rounding boundary.
  const double same = (kernel == aten).to(at::kDouble).mean().item<double>();
  EXPECT_GT(same, 0.99);
  EXPECT_TRUE(at::allclose(kernel.to(at::kFloat), aten.to(at::kFloat), 1.0 / 64, 1e-6));
  // kAten is llama_layers' composite, which is transformers' formula.
  EXPECT_TRUE(inference_rms_norm(xb, wb, 1e-5, KernelPath::kAten).equal(aten));
}

TEST(KernelAdapter, RmsNormOutsideTheKernelsIsAtens) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({8});
  EXPECT_FALSE(rms_norm_supported(x.t(), at::randn({4})));           // not contiguous
  EXPECT_FALSE(rms_norm_supported(x, w.to(at::kBFloat16)));          // dtypes differ
  EXPECT_FALSE(rms_norm_supported(x, at::randn({7})));
  const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);  // no kernel for f64
  EXPECT_FALSE(rms_norm_supported(xd, wd));
  EXPECT_TRUE(inference_rms_norm(xd, wd, 1e-6).equal(rms_norm_as_transformers(xd, wd, 1e-6)));
}

TEST(KernelAdapter, AddRmsNormGivesAtensSumAndItsNormInOneKernelCall) {
  at::manual_seed(6);
  for (at::ScalarType t : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(t));
    // A decode row and prefill rows.
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 384}, {9, 64}}) {
      const at::Tensor x = (at::randn(shape) * 3).to(t), residual = at::randn(shape).to(t);
      const at::Tensor w = at::randn({shape.back()}).to(t);
      AddedAndNormed got;
      EXPECT_EQ(aten_calls([&] { got = inference_add_rms_norm(x, residual, w, 1e-5); }),
                (std::vector<std::string>{"aten::empty_like", "aten::empty_like"}));
      const at::Tensor sum = x + residual;
      EXPECT_TRUE(got.sum.equal(sum));
      EXPECT_TRUE(got.normed.equal(inference_rms_norm(sum, w, 1e-5)));
    }
  }
}

TEST(KernelAdapter, AddRmsNormOutsideTheKernelIsAtensAddThenTheNorm) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({2, 16}), w = at::randn({16});
  // A residual that broadcasts, one of another dtype, and f64 (no kernel): ATen's add.
  for (const auto& [a, r, weight] :
       {std::tuple<at::Tensor, at::Tensor, at::Tensor>{x, at::randn({16}), w},
        {x, at::randn({2, 16}).to(at::kDouble), w},
        {x.to(at::kDouble), at::randn({2, 16}).to(at::kDouble), w.to(at::kDouble)}}) {
    const AddedAndNormed got = inference_add_rms_norm(a, r, weight, 1e-6);
    const at::Tensor sum = a + r;
    EXPECT_TRUE(got.sum.equal(sum));
    EXPECT_TRUE(got.normed.equal(inference_rms_norm(sum, weight, 1e-6)));
  }
}

TEST(KernelAdapter, DecodeAttentionReadsEachUnitsListFromItsRowOfATable) {
  at::manual_seed(10);
  const int64_t Hq = 8, units = 4, d = 32, width = 50;
  const at::Tensor q = at::randn({Hq, d}), k_pool = at::randn({300, d}), v_pool = at::randn({300, d});
  const std::vector<int64_t> counts = {40, 0, 7, 50};
  const at::Tensor table = at::randint(300, {units, width + 3}, at::kLong);  // extra slots: other rows
  std::vector<at::Tensor> lists;
  std::vector<int64_t> indptr = {0};
  for (int64_t u = 0; u < units; ++u) {
    lists.push_back(table[u].narrow(0, 0, counts[size_t(u)]));
    indptr.push_back(indptr.back() + counts[size_t(u)]);
  }
  const at::Tensor ptr = at::tensor(indptr), packed = at::cat(lists);
  std::vector<at::Tensor> want_probs;
  const at::Tensor want = sparse_decode_attention(q, k_pool, v_pool, ptr, packed, 0.2, &want_probs);
  // A view of the table's first `width` columns (read in place), and the same lists in a
  // transposed layout (not row-contiguous: read from a contiguous copy).
  const at::Tensor view = table.narrow(1, 0, width);
  const at::Tensor transposed = table.t().contiguous().t().narrow(1, 0, width);
  for (const at::Tensor& rows : {view, transposed}) {
    std::vector<at::Tensor> probs;
    EXPECT_TRUE(sparse_decode_attention(q, k_pool, v_pool, ptr, rows, 0.2, &probs).equal(want));
    ASSERT_EQ(probs.size(), want_probs.size());
    for (size_t u = 0; u < probs.size(); ++u) EXPECT_TRUE(probs[u].equal(want_probs[u])) << u;
  }
}

TEST(KernelAdapter, KvRowsInOneKernelCallAreAtensTwoIndexCopies) {
  at::manual_seed(9);
  for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kDouble}) {
    SCOPED_TRACE(c10::toString(t));
    const at::Tensor k_pool = at::randn({64, 16}).to(t), v_pool = at::randn({64, 16}).to(t);
    const at::Tensor k = at::randn({4, 16}).to(t), v = at::randn({4, 16}).to(t);
    // A column of a [4, 16] block table (stride 16), as a decode step's append passes it.
    const at::Tensor table = at::randperm(64, at::kLong).narrow(0, 0, 64).view({4, 16});
    const at::Tensor rows = table.select(1, 5);
    at::Tensor k_got = k_pool.clone(), v_got = v_pool.clone();
    std::vector<std::string> calls =
        aten_calls([&] { write_kv_rows(k_got, v_got, rows, k, v); });
    EXPECT_TRUE(k_got.equal(k_pool.clone().index_copy_(0, rows, k)));
    EXPECT_TRUE(v_got.equal(v_pool.clone().index_copy_(0, rows, v)));
    // The kernel takes any element type on the CPU: no ATen call.
    EXPECT_TRUE(calls.empty()) << calls.size();
  }
  // Another dtype than the pools': ATen's index_copy_ (which refuses it).
  at::Tensor k_pool = at::randn({8, 4}), v_pool = at::randn({8, 4});
  const at::Tensor rows = at::tensor(std::vector<int64_t>{3, 1});
  EXPECT_THROW(write_kv_rows(k_pool, v_pool, rows, at::randn({2, 4}).to(at::kDouble),
                             at::randn({2, 4}).to(at::kDouble)),
               c10::Error);
}

TEST(KernelAdapter, RopeKernelGivesAtensBitsInFp32AndBf16) {
  at::manual_seed(7);
  // Decode (one position, the layer's q and k heads) and prefill-shaped (several positions);
  // every channel rotated (Llama), or the first half only (partial rotary).
  for (auto [heads, L, d, r] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{40, 1, 128, 128},
                                {6, 9, 64, 64}, {3, 5, 64, 32}}) {
    for (at::ScalarType t : {at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE(std::string(c10::toString(t)) + " r " + std::to_string(r) + " L " +
                   std::to_string(L));
      const at::Tensor x = (at::randn({heads, L, d}) * 3).to(t);
      const at::Tensor angle = at::rand({L, r / 2}) * 6;
      const RopeAngles rope{false, at::cat({angle.cos(), angle.cos()}, -1).to(t),
                            at::cat({-angle.sin(), angle.sin()}, -1).to(t)};
      at::Tensor got;
      EXPECT_EQ(aten_calls([&] { got = inference_apply_rope(x, rope); }),
                std::vector<std::string>{"aten::empty_like"});  // the kernel, not ATen's 4
      EXPECT_TRUE(got.equal(apply_rope(x, rope)));
    }
  }
}

}  // namespace
}  // namespace kvb
