// The prefill's fused causal attention (ATen's scaled_dot_product_attention, on a GPU in
// bf16/f16 with LibTorch 2.x) against the chunked one (label "gpu"; "skipped: no GPU" elsewhere).
#include <gtest/gtest.h>

#include "engine/session.h"
#include "tests/methods/device_compare.h"

namespace kvb {
namespace {

// The logits of every prompt position ([L, V], fp32 on the host).
at::Tensor prompt_logits(const LlamaModel& model, const std::vector<int>& prompt, bool fused) {
  const MethodInfo& full = *method_registry().find("full");
  std::unique_ptr<Method> method = full.create(full.normalise_config(json::object(), full.name));
  SessionOptions options;
  options.fused_prefill_attention = fused;
  Session session(model, *method, options);
  return session.prefill(prompt, /*all_logits=*/true).to(at::kCPU, at::kFloat);
}

// The largest error of any position's logits, relative to that position's largest reference logit.
double worst_row_error(const at::Tensor& reference, const at::Tensor& other) {
  const at::Tensor scale = reference.abs().amax(1);
  return ((reference - other).abs().amax(1) / scale).max().item<double>();
}

TEST(Gpu, FusedPrefillAttentionMatchesTheChunkedOneInBf16) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("kvbench-tiny");  // d = 32: the flash kernel's
  auto gpu = model->to(at::Device(at::kCUDA, 0), at::kBFloat16);
  const std::vector<int> prompt = test::parity_prompt(1500);
  const at::Tensor reference = prompt_logits(*model, prompt, true);  // fp32 CPU: chunked
  const at::Tensor fused = prompt_logits(*gpu, prompt, true);
  const at::Tensor chunked = prompt_logits(*gpu, prompt, false);
  ASSERT_TRUE(at::isfinite(fused).all().item<bool>());
  // The bf16 tolerance of Gpu.EmbeddedModelLogitsInBf16OnCudaNearFp32OnTheCpu, at every position.
  EXPECT_LT(worst_row_error(reference, fused), 0.04);
  EXPECT_LT(worst_row_error(reference, chunked), 0.04);
  EXPECT_FALSE(fused.equal(chunked)) << "the same bits: the fused attention did not run";
}

TEST(Gpu, PrefillInFp32OnCudaKeepsTheChunkedAttention) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("kvbench-tiny");
  auto gpu = model->to(at::Device(at::kCUDA, 0), at::kFloat);
  const std::vector<int> prompt = test::parity_prompt(300);
  EXPECT_TRUE(prompt_logits(*gpu, prompt, true).equal(prompt_logits(*gpu, prompt, false)));
}

}  // namespace
}  // namespace kvb
