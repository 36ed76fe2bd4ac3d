// engine/phase_clock.h on the CPU: intervals are added at once, settle() changes nothing.
// (On a GPU, tests/gpu/phase_clock_gpu_test.cpp.)
#include "engine/phase_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvb {
namespace {

TEST(PhaseClock, OnTheCpuAddsEachIntervalAtOnce) {
  PhaseClock clock(at::kCPU);
  double total = 1.0;
  const PhaseClock::Mark start = clock.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.add_since(start, &total);
  EXPECT_GE(total, 1.0 + 0.019);
  EXPECT_LT(total, 1.0 + 5.0);
  const double before = total;
  clock.settle();
  EXPECT_EQ(total, before);
}

}  // namespace
}  // namespace kvb
