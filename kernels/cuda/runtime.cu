#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {

int device_count() {
  int count = 0;
  // cudaErrorNoDevice / cudaErrorInsufficientDriver without a GPU: report none.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count;
}

void check_launch(const char* what) {
  const cudaError_t error = cudaGetLastError();  // also clears it
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": CUDA kernel launch failed: " +
                             cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

}  // namespace kvb::cuda
