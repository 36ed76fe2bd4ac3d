// engine/sdpa_reference.h on the CPU. Debian's LibTorch 1.13 has no scaled_dot_product_attention:
// there the reference is absent, and says so. (On a GPU, tests/gpu/sdpa_reference_gpu_test.cpp.)
#include "engine/sdpa_reference.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <stdexcept>

namespace kvb {
namespace {

TEST(SdpaReference, AvailableExactlyFromLibTorch25) {
  const bool gqa = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5);
  EXPECT_EQ(sdpa_reference_available(), gqa);
  const std::optional<double> s = sdpa_decode_seconds(at::kCPU, at::kFloat, 8, 2, 16, 512, 3);
  EXPECT_EQ(s.has_value(), gqa);
  if (s) {
    EXPECT_GT(*s, 0.0);
    EXPECT_LT(*s, 5.0);
  }
}

TEST(SdpaReference, RefusesShapesItCannotTime) {
  EXPECT_THROW(sdpa_decode_seconds(at::kCPU, at::kFloat, 6, 4, 16, 512), std::invalid_argument);
  EXPECT_THROW(sdpa_decode_seconds(at::kCPU, at::kFloat, 8, 2, 16, 0), std::invalid_argument);
  EXPECT_THROW(sdpa_decode_seconds(at::kCPU, at::kFloat, 8, 2, 16, 512, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvb
