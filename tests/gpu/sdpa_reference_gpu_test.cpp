// engine/sdpa_reference.h on a GPU (label "gpu"; "skipped: no GPU" elsewhere): the reference
// row of a latency cell is timed, and reading 4x the keys takes longer.
#include "engine/sdpa_reference.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace kvb {
namespace {

TEST(Gpu, SdpaReferenceTimesADecodeQueryOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "skipped: no GPU";
  ASSERT_TRUE(sdpa_reference_available()) << "a CUDA LibTorch older than 2.5";
  const at::Device gpu(at::kCUDA, 0);
  // Llama-3-8B's attention shape in bf16: 32 query heads over 8 KV heads of 128.
  const std::optional<double> short_one = sdpa_decode_seconds(gpu, at::kBFloat16, 32, 8, 128, 32768);
  const std::optional<double> long_one = sdpa_decode_seconds(gpu, at::kBFloat16, 32, 8, 128, 131072);
  ASSERT_TRUE(short_one && long_one);
  EXPECT_GT(*short_one, 1e-6);
  EXPECT_LT(*short_one, 0.01);
  EXPECT_GT(*long_one, 2 * *short_one) << "4x the keys, not 2x the time";
}

}  // namespace
}  // namespace kvb
