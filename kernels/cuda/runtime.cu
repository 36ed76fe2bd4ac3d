#include <cuda_runtime.h>

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

}  // namespace kvb::cuda
