// A CUDA kernel test's first line: skips, saying so, where kvbench's CUDA runtime sees no device
// (on a GPU machine and in the CUDA emulation, whose one device always exists).
#pragma once
#include <gtest/gtest.h>

#include "kernels/cuda/kvbench_cuda.h"

#define KVB_REQUIRE_GPU() \
  if (::kvb::cuda::device_count() == 0) GTEST_SKIP() << "skipped: no GPU"
