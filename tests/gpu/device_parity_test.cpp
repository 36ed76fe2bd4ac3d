// On a GPU (CTest label "gpu"; "skipped: no GPU" elsewhere): every method and the engine give on
// CUDA what they give on the CPU, and the model of real size runs there.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "engine/kernel_adapter.h"
#include "tests/methods/device_compare.h"

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

// ClusterKV's selection through the CUDA kernel equals ATen's, on random clusterings of every
// head (empty clusters included), for budgets inside the first cluster, across several, and
// all members.
TEST(Gpu, ClusterMembersInRankOrderOnTheKernelMatchAten) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  at::manual_seed(5);
  const int64_t H = 8, N = 6000;
  // 300 clusters; the most the kernel's scan holds (8 per thread); one more (ATen).
  for (const int64_t C : {int64_t(300), int64_t(2048), int64_t(2049)}) {
    // Even clusters only: every odd one is empty.
    const at::Tensor labels = at::randint(C / 2, {H, N}, at::kLong) * 2;
    const at::Tensor order = std::get<1>(labels.sort(/*stable=*/true, 1));  // grouped by cluster
    const at::Tensor sizes =
        at::zeros({H, C}, at::kLong).scatter_add_(1, labels, at::ones({H, N}, at::kLong));
    const at::Tensor starts = sizes.cumsum(1) - sizes;
    const at::Tensor ranked = std::get<1>(at::randn({H, C}).sort(/*stable=*/true, 1));
    for (const int64_t take : {int64_t(1), int64_t(3), int64_t(1024), N}) {
      const at::Tensor kernel = cluster_members_in_rank_order(ranked.to(gpu), sizes.to(gpu),
                                                              starts.to(gpu), order.to(gpu), take);
      const at::Tensor aten = cluster_members_in_rank_order(ranked, sizes, starts, order, take,
                                                            KernelPath::kAten);
      EXPECT_EQ(kernel.scalar_type(), at::kLong);
      EXPECT_TRUE(kernel.cpu().equal(aten)) << "C " << C << ", take " << take;
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
