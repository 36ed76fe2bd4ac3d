// OMP_NUM_THREADS as kvbench_bench reads it: a count, a list's first level, or refused; and
// --threads reaching both CPU pools.
#include "engine/common/thread_pools.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(OmpNumThreads, UnsetOrEmptyLeavesTheDefault) {
  EXPECT_EQ(omp_num_threads(nullptr), 0);
  EXPECT_EQ(omp_num_threads(""), 0);
}

TEST(OmpNumThreads, ACountOrAListsFirstLevel) {
  EXPECT_EQ(omp_num_threads("1"), 1);
  EXPECT_EQ(omp_num_threads("16"), 16);
  EXPECT_EQ(omp_num_threads("4,2"), 4);
}

TEST(OmpNumThreads, AnythingElseIsRefused) {
  for (const char* bad : {"abc", "0", "-2", "4x", "x4", ",4", "99999999999"})
    EXPECT_FALSE(omp_num_threads(bad).has_value()) << bad;
}

// `--threads 1` ran OpenBLAS's matrix products on every core: at::set_num_threads leaves its
// pool alone.
TEST(SetCpuThreads, SetsOpenblasPoolToo) {
  const std::optional<int> openblas_before = openblas_threads();
  if (!openblas_before) GTEST_SKIP() << "this LibTorch does not use OpenBLAS";
  const int torch_before = at::get_num_threads();
  EXPECT_EQ(set_cpu_threads(1), 1);
  EXPECT_EQ(openblas_threads(), 1);
  EXPECT_EQ(set_cpu_threads(2), 2);
  EXPECT_EQ(openblas_threads(), 2);
  set_cpu_threads(torch_before);
  EXPECT_EQ(at::get_num_threads(), torch_before);
}

}  // namespace
}  // namespace kvb
