// The CUDA emulation's stand-in for LibTorch's header (tests/cuda_emulation/README.md): what
// kernels/cuda/torch_glue.cpp takes from it, the current stream, on a "device" that is the host.
#pragma once

namespace at::cuda {

struct EmulatedStream {
  void* stream() const { return nullptr; }  // the emulated kernels run at their launch
};

inline EmulatedStream getCurrentCUDAStream() { return {}; }

}  // namespace at::cuda
