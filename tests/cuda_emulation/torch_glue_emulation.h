// Included first by the emulated kernels/cuda/torch_glue.cpp (translate.cmake's GLUE mode;
// tests/cuda_emulation/README.md): the glue's fresh tensors as fresh device memory is here,
// 0xFF bytes (NaN floats, -1 integers), so that an output a kernel leaves unwritten shows.
#pragma once
#include <ATen/ATen.h>

#include <cstring>

namespace kvb_emu {

inline at::Tensor poisoned(at::Tensor t) {
  if (t.nbytes() > 0) std::memset(t.data_ptr(), 0xFF, t.nbytes());
  return t;
}

inline at::Tensor empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  return poisoned(at::empty(sizes, options));
}

inline at::Tensor empty_like(const at::Tensor& like) { return poisoned(at::empty_like(like)); }

}  // namespace kvb_emu
