#include "kernels/rms_norm.h"

#include <cmath>
#include <stdexcept>

namespace kvb::kernels {
namespace {

template <typename T>
void rms_norm_row(const T* x, const T* weight, T* out, int64_t dim, float eps) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < dim; ++i) {
    const float v = widen(x[i]);
    sum += double(v * v);
  }
  const float r = 1.f / std::sqrt(float(sum) / float(dim) + eps);
  for (int64_t i = 0; i < dim; ++i)
    out[i] = narrow_to<T>(widen(narrow_to<T>(widen(x[i]) * r)) * widen(weight[i]));
}

template <typename T>
void rms_norm_rows(const T* x, const T* weight, T* out, int64_t rows, int64_t dim, float eps) {
  // Threads only when there is work for them: a decode step's single row runs inline.
#pragma omp parallel for schedule(static) if (rows > 1 && rows * dim >= (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(x + r * dim, weight, out + r * dim, dim, eps);
}

}  // namespace

void rms_norm(const void* x, const void* weight, void* out, KvElement type, int64_t rows,
              int64_t dim, float eps) {
  switch (type) {
    case KvElement::kF32:
      return rms_norm_rows(static_cast<const float*>(x), static_cast<const float*>(weight),
                           static_cast<float*>(out), rows, dim, eps);
    case KvElement::kBF16:
      return rms_norm_rows(static_cast<const bf16*>(x), static_cast<const bf16*>(weight),
                           static_cast<bf16*>(out), rows, dim, eps);
    case KvElement::kF16:
      break;
  }
  throw std::invalid_argument("kernels::rms_norm: fp32 and bf16 only");
}

}  // namespace kvb::kernels
