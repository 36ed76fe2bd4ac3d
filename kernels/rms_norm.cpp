#include "kernels/rms_norm.h"

#include <cmath>
#include <stdexcept>

namespace kvb::kernels {
namespace {

// One row; with `residual`, the row normalised is sum = round(x + residual), written out first.
template <typename T>
void rms_norm_row(const T* x, const T* residual, const T* weight, T* sum, T* out, int64_t dim,
                  float eps) {
  if (residual) {
    for (int64_t i = 0; i < dim; ++i) sum[i] = narrow_to<T>(widen(x[i]) + widen(residual[i]));
    x = sum;
  }
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < dim; ++i) {
    const float v = widen(x[i]);
    squares += double(v * v);
  }
  const float r = 1.f / std::sqrt(float(squares) / float(dim) + eps);
  for (int64_t i = 0; i < dim; ++i)
    out[i] = narrow_to<T>(widen(narrow_to<T>(widen(x[i]) * r)) * widen(weight[i]));
}

template <typename T>
void rms_norm_rows(const T* x, const T* residual, const T* weight, T* sum, T* out, int64_t rows,
                   int64_t dim, float eps) {
  // Threads only when there is work for them: a decode step's single row runs inline.
#pragma omp parallel for schedule(static) if (rows > 1 && rows * dim >= (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(x + r * dim, residual ? residual + r * dim : nullptr, weight,
                 sum ? sum + r * dim : nullptr, out + r * dim, dim, eps);
}

void rows_of_type(const void* x, const void* residual, const void* weight, void* sum, void* out,
                  KvElement type, int64_t rows, int64_t dim, float eps) {
  switch (type) {
    case KvElement::kF32:
      return rms_norm_rows(static_cast<const float*>(x), static_cast<const float*>(residual),
                           static_cast<const float*>(weight), static_cast<float*>(sum),
                           static_cast<float*>(out), rows, dim, eps);
    case KvElement::kBF16:
      return rms_norm_rows(static_cast<const bf16*>(x), static_cast<const bf16*>(residual),
                           static_cast<const bf16*>(weight), static_cast<bf16*>(sum),
                           static_cast<bf16*>(out), rows, dim, eps);
    case KvElement::kF16:
      break;
  }
  throw std::invalid_argument("kernels::rms_norm: fp32 and bf16 only");
}

}  // namespace

void rms_norm(const void* x, const void* weight, void* out, KvElement type, int64_t rows,
              int64_t dim, float eps) {
  rows_of_type(x, nullptr, weight, nullptr, out, type, rows, dim, eps);
}

void add_rms_norm(const void* x, const void* residual, const void* weight, void* sum, void* out,
                  KvElement type, int64_t rows, int64_t dim, float eps) {
  rows_of_type(x, residual, weight, sum, out, type, rows, dim, eps);
}

}  // namespace kvb::kernels
