// OMP_NUM_THREADS as kvbench_bench reads it: a count, a list's first level, or refused.
#include "engine/common/thread_pools.h"

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

}  // namespace
}  // namespace kvb
