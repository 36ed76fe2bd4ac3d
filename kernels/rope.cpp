#include "kernels/rope.h"

#include <stdexcept>

namespace kvb::kernels {
namespace {

// a * b rounded to T, in fp32. This file is compiled with -ffp-contract=off (CMakeLists.txt):
// a product and the sum that follows are rounded apart, as ATen's separate operators round them.
template <typename T>
float product(T a, T b) {
  return widen(narrow_to<T>(widen(a) * widen(b)));
}

template <typename T>
void rotate_row(const T* x, const T* cos, const T* sin, T* out, int64_t d, int64_t r) {
  const int64_t half = r / 2;
  for (int64_t i = 0; i < r; ++i) {
    const T swapped = i < half ? x[i + half] : x[i - half];
    out[i] = narrow_to<T>(product(x[i], cos[i]) + product(swapped, sin[i]));
  }
  for (int64_t i = r; i < d; ++i) out[i] = x[i];
}

template <typename T>
void rotate_rows(const T* x, const T* cos, const T* sin, T* out, int64_t n, int64_t L,
                 int64_t d, int64_t r) {
  // Threads only for a prefill's rows: a decode step's few heads run inline.
#pragma omp parallel for schedule(static) if (n * L * d >= (int64_t(1) << 16))
  for (int64_t row = 0; row < n * L; ++row) {
    const int64_t position = row % L;
    rotate_row(x + row * d, cos + position * r, sin + position * r, out + row * d, d, r);
  }
}

}  // namespace

void rope_rotate_half(const void* x, const void* cos, const void* sin, void* out, KvElement type,
                      int64_t n, int64_t L, int64_t d, int64_t r) {
  if (r <= 0 || r % 2 != 0 || r > d)
    throw std::invalid_argument("kernels::rope_rotate_half: r must be even, 0 < r <= d");
  switch (type) {
    case KvElement::kF32:
      return rotate_rows(static_cast<const float*>(x), static_cast<const float*>(cos),
                         static_cast<const float*>(sin), static_cast<float*>(out), n, L, d, r);
    case KvElement::kBF16:
      return rotate_rows(static_cast<const bf16*>(x), static_cast<const bf16*>(cos),
                         static_cast<const bf16*>(sin), static_cast<bf16*>(out), n, L, d, r);
    case KvElement::kF16:
      break;
  }
  throw std::invalid_argument("kernels::rope_rotate_half: fp32 and bf16 only");
}

}  // namespace kvb::kernels
