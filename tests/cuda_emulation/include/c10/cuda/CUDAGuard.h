// The CUDA emulation's stand-in for LibTorch's header (tests/cuda_emulation/README.md): one
// emulated device, so a device guard has nothing to switch.
#pragma once
#include <c10/core/Device.h>

namespace c10::cuda {

struct CUDAGuard {
  explicit CUDAGuard(c10::Device) {}
};

}  // namespace c10::cuda
