// engine/phase_clock.h on a GPU (label "gpu"; "skipped: no GPU" elsewhere): with the CUDA
// build's events an interval reaches its total at settle(), measuring the device's work.
#include "engine/phase_clock.h"

#include <gtest/gtest.h>

#include <torch/cuda.h>

namespace kvb {
namespace {

TEST(Gpu, PhaseClockTimesDeviceWorkBySettle) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "skipped: no GPU";
  const at::Device gpu(at::kCUDA, 0);
  PhaseClock clock(gpu);
  at::Tensor a = at::randn({4096, 4096}, at::TensorOptions(gpu));
  double total = 0;
  const PhaseClock::Mark start = clock.mark();
  for (int i = 0; i < 20; ++i) a = at::mm(a, a).div_(64.0);  // ~3 TFLOP of queued work
  clock.add_since(start, &total);
  clock.settle();
  EXPECT_GT(total, 1e-4) << "20 4096^3 matmuls took no time";
  EXPECT_LT(total, 60.0);
  // The clock is reusable after settling.
  double again = 0;
  const PhaseClock::Mark second = clock.mark();
  a = at::mm(a, a);
  clock.add_since(second, &again);
  clock.settle();
  EXPECT_GT(again, 0.0);
}

}  // namespace
}  // namespace kvb
