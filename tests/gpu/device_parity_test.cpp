// On a GPU (CTest label "gpu"; "skipped: no GPU" elsewhere): every method and the engine give on
// CUDA what they give on the CPU, and the model of real size runs there.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/kernel_adapter.h"
#if KVBENCH_CUDA_KERNELS
#include "kernels/cuda/torch_glue.h"
#endif
#include "tests/methods/device_compare.h"
#include "tests/methods/retrieval/pq_cache_counts_check.h"
#include "tests/methods/retrieval/pq_selection_check.h"

namespace kvb {
namespace {


TEST(Gpu, EveryMethodInFp32OnCudaMatchesTheCpu) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny");
  // Same arithmetic up to summation order (cuBLAS vs CPU BLAS): the same entries chosen.
  test::expect_methods_agree(*model, at::Device(at::kCUDA, 0), at::kFloat, 1e-4, 1e-4, true);
}

TEST(Gpu, EveryMethodSelectsTheSamePositionsOnCudaInFp32) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny");
  auto cuda = model->to(at::Device(at::kCUDA, 0), at::kFloat);
  for (const MethodInfo* m : method_registry().all())
    EXPECT_EQ(test::attended_positions(*cuda, *m, 32), test::attended_positions(*model, *m, 32))
        << m->name << ": selections differ (a tie broken differently would be named here)";
}

// PQCache's LFU accounting runs on a thread of its own on a GPU (at the flush on the CPU): it
// counts what a replay of each step's selection counts, over two flushes and the end's.
TEST(Gpu, PqcacheCountsEachStepsBlocksOnItsAccountingThread) {
  KVB_REQUIRE_GPU();
  test::expect_deferred_cache_counts(at::Device(at::kCUDA, 0));
}

// ClusterKV's rows on the kernel (cluster_rows.cu) equal ATen's, the cache's step table and
// hit count included: random clusterings of every head (every odd cluster empty), scores with
// and without ties (small integers) and with a NaN (ranked first, as ATen's sort ranks it);
// takes of none, inside the first cluster, across several and every member.
TEST(Gpu, ClusterRowsOnTheKernelMatchAten) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  at::manual_seed(5);
  const int64_t H = 8, N = 6000, sinks = 16, recent = 40, n = sinks + N + recent, step = 9;
  for (const int64_t C : {int64_t(300), int64_t(2048), int64_t(9000)})
    for (const int ties : {0, 1, 2}) {  // none, small integers, a NaN
      const at::Tensor labels = at::randint(C / 2, {H, N}, at::kLong) * 2;
      const at::Tensor members =
          (std::get<1>(labels.sort(/*stable=*/true, 1)) + sinks).to(at::kInt);  // [H, N]
      const at::Tensor sizes = at::zeros({H, C}, at::kLong)
                                   .scatter_add_(1, labels, at::ones({H, N}, at::kLong))
                                   .to(at::kInt);
      const at::Tensor starts = (sizes.cumsum(1) - sizes).to(at::kInt);
      at::Tensor scores = at::randn({H, C});
      if (ties == 1) scores = (scores * 2).round();
      if (ties == 2) scores[3][C / 3].fill_(std::numeric_limits<float>::quiet_NaN());
#if KVBENCH_CUDA_KERNELS
      ASSERT_TRUE(cuda::cluster_rows_supported(scores.to(gpu), sizes.to(gpu), starts.to(gpu),
                                               members.to(gpu), n));
#endif
      for (const int64_t take : {int64_t(0), int64_t(1), int64_t(3), int64_t(1024), N}) {
        SCOPED_TRACE("C " + std::to_string(C) + ", ties " + std::to_string(ties) + ", take " +
                     std::to_string(take));
        const at::Tensor last = at::randint(-1, step, {H, n + 3}, at::kLong);
        ClusterCacheStep on_gpu{last.to(gpu), step, step - 2, at::full({}, 4, at::kLong).to(gpu)};
        ClusterCacheStep on_cpu{last.clone(), step, step - 2, at::full({}, 4, at::kLong)};
        const at::Tensor kernel = cluster_rows(scores.to(gpu), sizes.to(gpu), starts.to(gpu),
                                               members.to(gpu), take, sinks, n - recent, n, &on_gpu);
        const at::Tensor aten = cluster_rows(scores, sizes, starts, members, take, sinks,
                                             n - recent, n, &on_cpu, KernelPath::kAten);
        ASSERT_EQ(kernel.scalar_type(), at::kLong);
        EXPECT_TRUE(kernel.cpu().equal(aten));
        EXPECT_TRUE(on_gpu.last_selected.cpu().equal(on_cpu.last_selected));
        EXPECT_EQ(on_gpu.hits.item<int64_t>(), on_cpu.hits.item<int64_t>());
        // Without the cache: the same rows.
        EXPECT_TRUE(cluster_rows(scores.to(gpu), sizes.to(gpu), starts.to(gpu), members.to(gpu),
                                 take, sinks, n - recent, n, nullptr)
                        .cpu()
                        .equal(aten));
      }
    }
}

// Whether the adapter's GPU path is the top_pages kernel, as it must be on a CUDA build (ATen
// on the GPU there would make the comparisons below vacuous).
bool adapter_takes_the_top_pages_kernel(const at::Device& gpu) {
#if KVBENCH_CUDA_KERNELS
  return cuda::top_pages_supported(at::zeros({8, 4}, at::TensorOptions(gpu)));
#else
  (void)gpu;
  return true;  // a build without the kernels: ATen's on both sides, as designed
#endif
}

// Quest's selection kernel (top_pages) gives ATen's entries (a stable sort's ranking, Quest's
// tests compare that with the host's): page counts within one chunk of the block, across
// chunks, beyond ATen's 4096-row sort and long enough for the kernel's two launches; scores with many ties (small integers, +0 and -0
// among them) and without; whole pages only (the reference kernel's budget), a trimmed last
// page (fill), no page but the current one; current pages partly and wholly filled; rows of
// zeros alone.
TEST(Gpu, QuestTopPagesOnTheKernelMatchAten) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  ASSERT_TRUE(adapter_takes_the_top_pages_kernel(gpu));
  at::manual_seed(6);
  const int64_t page = 16;
  for (const int64_t units : {int64_t(1), int64_t(8), int64_t(32)})
    for (const int64_t pages : {int64_t(3), int64_t(63), int64_t(1024), int64_t(1500), int64_t(8192),
                                int64_t(20000)})
      for (const int ties : {0, 1, 2}) {  // none, small integers, zeros of both signs alone
        const at::Tensor raw = at::randn({units, pages + 1});  // [units, P]: the current page last
        const at::Tensor scores = ties == 0   ? raw
                                  : ties == 1 ? (raw * 2).round() * at::sign(at::randn({units, 1}))
                                              : at::zeros_like(raw) * at::sign(raw);
        const int64_t most = std::min<int64_t>(pages - 1, 63);
        const std::vector<std::pair<int64_t, int64_t>> takes = {  // {whole, part}
            {most, 0}, {most, 7}, {0, 0}, {0, 15}, {1, 0}, {pages, 0}, {pages / 2, 3}};
        for (const auto& [whole, part] : takes) {
          if (whole + (part > 0 ? 1 : 0) > pages) continue;
          for (const int64_t fill : {int64_t(1), int64_t(9), page}) {
            const int64_t n = pages * page + fill;
            const at::Tensor kernel = top_page_entries(scores.to(gpu), pages, whole, part, page, n);
            const at::Tensor aten =
                top_page_entries(scores, pages, whole, part, page, n, KernelPath::kAten);
            ASSERT_EQ(kernel.scalar_type(), at::kLong);
            EXPECT_TRUE(kernel.cpu().equal(aten))
                << units << " units, " << pages << " pages, ties " << ties << ", whole " << whole
                << ", part " << part << ", fill " << fill;
          }
        }
      }
}

// PQCache's top-k on the kernel gives the ATen path's indices: distinct scores, tied ones
// (small integers: ties at the k-th score to the lower indices on both), NaNs among them.
// Sizes within one chunk of the block's output pass (8192), across chunks, 20k and 128k (two
// launches for k = 1 and 496); k from 1 to every score; with PQCache's sinks before and its
// window after the candidates.
TEST(Gpu, PqcacheTopKOnTheKernelIsAtensAndTiesGoLow) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  ASSERT_TRUE(adapter_takes_the_top_pages_kernel(gpu));
  at::manual_seed(7);
  for (const int64_t n : {int64_t(500), int64_t(8192), int64_t(20000), int64_t(131072)})
    for (const int64_t k : {int64_t(1), int64_t(496), n}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", k " + std::to_string(k));
      const at::Tensor distinct = at::randn({8, n});
      const at::Tensor tied = (at::randn({8, n}) * 3).round();  // [8, n]
      const at::Tensor with_nan = tied.masked_fill(at::rand({8, n}) < 0.001, NAN);
      for (const at::Tensor& scores : {distinct, tied, with_nan}) {
        EXPECT_TRUE(top_k_ascending(scores.to(gpu), k, 0, 0).cpu().equal(
            top_k_ascending(scores, k, 0, 0, KernelPath::kAten)));
        EXPECT_TRUE(top_k_ascending(scores.to(gpu), k, 32, 496).cpu().equal(
            top_k_ascending(scores, k, 32, 496, KernelPath::kAten)));
      }
    }
}

// InfiniGen's fetch with its count on the device (one launch a layer: the top pages kernel
// reading the limit there) gives ATen's composition's entries on the same device for distinct
// scores: counts from 1 to past the cap, rows within one block's pass and beyond (chunks).
TEST(Gpu, InfinigenFetchRowsOnTheKernelMatchAten) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  ASSERT_TRUE(adapter_takes_the_top_pages_kernel(gpu));
  at::manual_seed(11);
  for (const int64_t n : {int64_t(700), int64_t(40000)}) {
    const at::Tensor scores = at::randn({8, n}, at::TensorOptions().device(gpu));
    for (const int64_t limit : {int64_t(1), int64_t(2), int64_t(300), int64_t(1023),
                                int64_t(1024), int64_t(5000)}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", limit " + std::to_string(limit));
      const at::Tensor fetch = at::full({}, limit, scores.options().dtype(at::kLong));
      const int64_t k = std::min(n, int64_t(1023));  // at most every row
      const at::Tensor kernel = top_k_ascending_then_last(scores, fetch, k);
      const at::Tensor aten = top_k_ascending_then_last(scores, fetch, k, KernelPath::kAten);
      EXPECT_TRUE(kernel.cpu().equal(aten.cpu()));
    }
  }
}

// PQCache's selection on the kernel (one launch a layer: kvbench_cuda.h pq_top_k) picks what
// ATen's composition picks on the CPU up to near ties, and of tokens with equal codes the
// earlier ones (pq_selection_check.h): PQCache's m = 2, b = 6 (4096 combinations) on 8 KV heads
// of 128 with g = 4, and m = 1 (256) and m = 3, b = 4 (4096 of 3 sub-spaces); codes over the
// whole codebook and over 3 values (the k-th among many ties); n within one chunk of the output
// pass, across chunks and 131 072; k from 1 to every token; q in fp32 and bf16; the codes a
// narrow view of wider rows, as PQCache reads them; the row in one launch or in two over 3 to 64
// slices, the same entries.
TEST(Gpu, PqcacheSelectionByCombinationOnTheKernelIsTheCompositions) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
#if KVBENCH_CUDA_KERNELS
  ASSERT_TRUE(cuda::pq_top_k_supported(at::zeros({8, 4, 128}, at::TensorOptions(gpu)),
                                       at::zeros({8, 2, 64, 64}, at::TensorOptions(gpu))));
#endif
  at::manual_seed(8);
  struct Case { int64_t m, K, n; };
  for (const Case c : {Case{2, 64, 500}, Case{2, 64, 8192}, Case{2, 64, 20000},
                       Case{2, 64, 131072}, Case{1, 256, 20000}, Case{3, 16, 20000}})
    for (const int64_t alphabet : {c.K, int64_t(3)})
      for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        const int64_t H = 8, g = 4, d = 128, s = d / c.m, n = c.n;
        const at::Tensor centroids = at::randn({H, c.m, c.K, s});
        const at::Tensor wide = at::randint(0, alphabet, {H, c.m, n + 64}, at::kByte);
        const at::Tensor codes = wide.narrow(2, 0, n);  // [H, m, n], rows n + 64 apart
        const at::Tensor q = at::randn({H, g, c.m * s}).to(dtype);
        const double scale = 1.0 / std::sqrt(double(d));
        for (const int64_t k : {int64_t(1), int64_t(496), n}) {
          SCOPED_TRACE("m " + std::to_string(c.m) + ", n " + std::to_string(n) + ", codes < " +
                       std::to_string(alphabet) + ", " + std::string(c10::toString(dtype)) +
                       ", k " + std::to_string(k));
          const at::Tensor got = pq_top_k(q.to(gpu), centroids.to(gpu),
                                          wide.to(gpu).narrow(2, 0, n), scale, k, 32, 497);
          ASSERT_TRUE(got.is_cuda());
          EXPECT_EQ(test::pq_selection_difference(got, q, centroids, codes, scale, k, 32, 497), "");
#if KVBENCH_CUDA_KERNELS
          // One launch or two over slices of the row (more slices than a block's chunk, and
          // than tokens at n = 500): every block ranks from the same counts, the same bits.
          for (const int64_t slices : {int64_t(1), int64_t(3), int64_t(16), int64_t(64)})
            EXPECT_TRUE(cuda::pq_top_k(q.to(gpu), centroids.to(gpu), wide.to(gpu).narrow(2, 0, n),
                                       scale, k, 32, 497, slices)
                            .equal(got))
                << slices << " slices";
#endif
        }
      }
}

TEST(Gpu, EveryMethodInBf16OnCudaStaysNearFp32OnTheCpu) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("kvbench-tiny");  // the CPU test's tolerances
  test::expect_methods_agree(*model, at::Device(at::kCUDA, 0), at::kBFloat16, 0.04, 0.15, false);
}

TEST(Gpu, EmbeddedModelLogitsInBf16OnCudaNearFp32OnTheCpu) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const MethodInfo& full = *method_registry().find("full");
  const test::ParityRun cpu = test::parity_run(*model, full, 0, test::parity_prompt(200), 4);
  const test::ParityRun gpu = test::parity_run(
      *model->to(at::Device(at::kCUDA, 0), at::kBFloat16), full, 0, test::parity_prompt(200), 4);
  EXPECT_LT(test::max_relative_error(cpu, gpu), 0.04);
}

TEST(Gpu, RandomLlama3_8bIsBuiltOnTheDeviceInBf16) {
  KVB_REQUIRE_GPU();
  LoadOptions options;
  options.device = at::Device(at::kCUDA, 0);
  options.dtype = at::kBFloat16;
  auto model = LlamaModel::from_reference("random-llama3-8b", options);
  EXPECT_EQ(model->layers.size(), 32u);
  EXPECT_TRUE(model->layers[31].w_down.is_cuda());
  EXPECT_EQ(model->layers[31].w_down.scalar_type(), at::kBFloat16);
  std::unique_ptr<Method> method = method_registry().find("full")->create(json::object());
  Session session(*model, *method, SessionOptions{});
  at::Tensor logits = session.prefill(test::parity_prompt(4096));
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
  EXPECT_TRUE(at::isfinite(session.decode(7)).all().item<bool>());
}

}  // namespace
}  // namespace kvb
