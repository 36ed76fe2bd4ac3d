// engine/device.h's HostCopy and SideStream on the CPU: the tensor itself, ready at once; the
// work at once (the GPU's queued copy and side stream: tests/gpu/device_sync_gpu_test.cpp).
#include "engine/device.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(HostCopy, OfACpuTensorIsThatTensor) {
  const at::Tensor x = at::arange(10, at::kInt);
  const HostCopy copy(x);
  const at::Tensor& host = copy.wait();
  EXPECT_TRUE(host.is_same(x));
  const HostCopy shared = copy;  // copies share the one copy
  EXPECT_TRUE(shared.wait().is_same(x));
}

// On the CPU there is one stream: run calls its work at once, join has nothing to wait for.
TEST(SideStream, OnTheCpuRunsTheWorkAtOnce) {
  SideStream side(at::Device(at::kCPU));
  const at::Tensor x = at::arange(4, at::kFloat);
  at::Tensor y;
  side.run({x}, [&] { y = x * 2; });
  ASSERT_TRUE(y.defined());
  EXPECT_TRUE(y.equal(at::tensor({0.f, 2.f, 4.f, 6.f})));
  side.join({y});
  EXPECT_TRUE(y.equal(at::tensor({0.f, 2.f, 4.f, 6.f})));
}

}  // namespace
}  // namespace kvb
