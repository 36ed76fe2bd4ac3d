// engine/device.h's HostCopy on the CPU: the tensor itself, ready at once (the GPU's queued copy:
// tests/gpu/device_sync_gpu_test.cpp).
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

}  // namespace
}  // namespace kvb
