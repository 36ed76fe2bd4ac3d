// engine/kernel_adapter.h: the CPU K-means kernels it picks for fp32 CPU inputs agree with its
// ATen path (Quest's and PQ's paths are compared in the methods' tests).
#include "engine/kernel_adapter.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(KernelAdapter, CosineAssignOnTheCpuKernelMatchesAten) {
  at::manual_seed(3);
  const at::Tensor keys = at::randn({2, 300, 16}), centroids = at::randn({2, 7, 16});
  const at::Tensor kernel = cosine_assign(keys, centroids);
  const at::Tensor aten = cosine_assign(keys, centroids, KernelPath::kAten);
  ASSERT_EQ(kernel.scalar_type(), at::kLong);
  ASSERT_EQ(kernel.sizes(), aten.sizes());
  // Random keys have no near ties at this size: every label agrees.
  EXPECT_TRUE(kernel.equal(aten));
}

TEST(KernelAdapter, ClusterMeansOnTheCpuKernelMatchesAtenAndKeepsEmptyClusters) {
  at::manual_seed(4);
  const at::Tensor keys = at::randn({2, 50, 8}), old = at::randn({2, 5, 8});
  const at::Tensor labels = at::randint(0, 4, {2, 50}, at::kLong);  // cluster 4 stays empty
  const at::Tensor kernel = cluster_means(keys, labels, old);
  const at::Tensor aten = cluster_means(keys, labels, old, KernelPath::kAten);
  EXPECT_TRUE(at::allclose(kernel, aten, 1e-5, 1e-6));
  EXPECT_TRUE(kernel.select(1, 4).equal(old.select(1, 4)));
  // Cluster 0 of head 1 by hand: the mean of its members.
  const at::Tensor members = keys[1].index({labels[1] == 0});
  EXPECT_TRUE(at::allclose(kernel[1][0], members.mean(0), 1e-5, 1e-6));
}

}  // namespace
}  // namespace kvb
