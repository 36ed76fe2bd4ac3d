// The prefill's fused causal attention (ATen's scaled_dot_product_attention, on a GPU in
// bf16/f16 with LibTorch 2.x) against the chunked one (label "gpu"; "skipped: no GPU" elsewhere).
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/session.h"
#include "tests/methods/device_compare.h"

namespace kvb {
namespace {

// The logits of every prompt position ([L, V], fp32 on the host), and the session's record of
// the kernel its prefill attention ran (SessionTimings::prefill_attention_kernel).
struct PromptRun {
  at::Tensor logits;
  int kernel;
};
PromptRun prompt_logits(const LlamaModel& model, const std::vector<int>& prompt, bool fused) {
  const MethodInfo& full = *method_registry().find("full");
  std::unique_ptr<Method> method = full.create(full.normalise_config(json::object(), full.name));
  SessionOptions options;
  options.fused_prefill_attention = fused;
  Session session(model, *method, options);
  at::Tensor logits = session.prefill(prompt, /*all_logits=*/true).to(at::kCPU, at::kFloat);
  return {logits, session.timings().prefill_attention_kernel};
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
  const PromptRun cpu = prompt_logits(*model, prompt, true);  // fp32 CPU: chunked
  const PromptRun gpu_fused = prompt_logits(*gpu, prompt, true);
  const PromptRun gpu_chunked = prompt_logits(*gpu, prompt, false);
  const at::Tensor &reference = cpu.logits, &fused = gpu_fused.logits, &chunked = gpu_chunked.logits;
  EXPECT_EQ(cpu.kernel, -1);
  EXPECT_GE(gpu_fused.kernel, 1) << "SDPBackend " << gpu_fused.kernel << ": not a fused kernel";
  EXPECT_EQ(gpu_chunked.kernel, -1);
  std::printf("fused prefill attention: SDPBackend %d (1 flash, 2 memory-efficient, 3 cuDNN)\n",
              gpu_fused.kernel);
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
  const PromptRun asked_fused = prompt_logits(*gpu, prompt, true);
  EXPECT_TRUE(asked_fused.logits.equal(prompt_logits(*gpu, prompt, false).logits));
  EXPECT_EQ(asked_fused.kernel, -1);
}

}  // namespace
}  // namespace kvb
