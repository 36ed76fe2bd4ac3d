// Host vectors on the device for the raw-pointer kernel tests (tests/kernels/cuda/), which run
// on a GPU (kvbench_gpu_tests) and on the CPU through the CUDA emulation
// (kvbench_cuda_emulation_tests, tests/cuda_emulation/README.md).
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/kvbench_cuda.h"
#include "tests/kernels/cuda/require_gpu.h"

namespace kvb::cuda {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(const std::vector<T>& host) : n(host.size()) {
    cudaMalloc(&ptr, n * sizeof(T));
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<T> get() const {
    std::vector<T> host(n);
    // A failed launch (e.g. no kernel image for this GPU's architecture) named, not a mismatch.
    EXPECT_NO_THROW(check_launch("the kernel under test"));
    const cudaError_t sync = cudaDeviceSynchronize();
    EXPECT_EQ(sync, cudaSuccess) << cudaGetErrorString(sync);
    cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

}  // namespace kvb::cuda
