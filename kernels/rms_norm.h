// Llama's RMSNorm of each row in one call (two passes over the row: its sum of squares, then
// the output), as transformers' LlamaRMSNorm computes it: the row widened to fp32,
// r = 1 / sqrt(sum of squares / dim + eps) in fp32 (the squares accumulated in double), the
// normalised row x * r rounded to the element type, then multiplied by the weight, each
// product rounded to the element type. ATen's composite of the same (engine/model/llama_layers)
// takes 6 operators in fp32 and 8 in bf16, each a pass over the row and, on a GPU, a launch.
// Framework-free.
#pragma once
#include <cstdint>

#include "kernels/kv_element.h"

namespace kvb::kernels {

// x, out: [rows, dim] of `type` (out may be x); weight: [dim] of `type`. fp32 and bf16 (the
// CPU dtypes kvbench runs; fp16 throws std::invalid_argument). Rows run on OpenMP threads when
// there are many.
void rms_norm(const void* x, const void* weight, void* out, KvElement type, int64_t rows,
              int64_t dim, float eps);

// A transformer block's residual add and the RMSNorm that follows it, in one call:
// sum = x + residual rounded to `type` (ATen's add: the fp32 sum, rounded once), then
// out = rms_norm(sum) as above. x, residual, sum, out: [rows, dim]; sum and out distinct from
// each other and from the inputs. The same types and threads as rms_norm.
void add_rms_norm(const void* x, const void* residual, const void* weight, void* sum, void* out,
                  KvElement type, int64_t rows, int64_t dim, float eps);

}  // namespace kvb::kernels
