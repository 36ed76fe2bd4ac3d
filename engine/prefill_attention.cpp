#include "engine/prefill_attention.h"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvb {

at::ScalarType attention_score_type(const at::Tensor& t) {
  return at::promote_types(t.scalar_type(), at::kFloat);
}

at::Tensor chunked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    int64_t score_bytes) {
  const int64_t Hq = q.size(0), L = q.size(1), d = q.size(2), Hkv = k.size(0), g = Hq / Hkv;
  const at::TensorOptions longs = q.options().dtype(at::kLong);
  const int64_t chunk =
      std::max<int64_t>(1, std::min<int64_t>(L, score_bytes / (int64_t(sizeof(float)) * Hq * L)));
  const double scale = 1.0 / std::sqrt(double(d));
  at::Tensor out = at::empty({Hkv, g, L, d}, q.options());
  // Scores, softmax and P.V in fp32 whatever the model's dtype (widened as read), as the decode
  // kernels compute them: a 16-bit product would round the scores (and P) first, so a token
  // would be attended otherwise prefilled than decoded (context_sharing's two ways of reading
  // one prompt would differ under bf16).
  const at::ScalarType score_type = attention_score_type(q);
  const at::Tensor k_scores = k.to(score_type), v_scores = v.to(score_type);
  at::Tensor q_grouped = q.view({Hkv, g, L, d});
  for (int64_t c0 = 0; c0 < L; c0 += chunk) {
    const int64_t n = std::min(chunk, L - c0), keys = c0 + n;
    at::Tensor qc = q_grouped.narrow(2, c0, n).reshape({Hkv, g * n, d}).to(score_type);
    at::Tensor scores = at::bmm(qc, k_scores.narrow(1, 0, keys).transpose(1, 2))
                            .mul_(scale)
                            .view({Hkv, g, n, keys});
    // Query c0+i sees keys 0..c0+i.
    at::Tensor mask = at::arange(keys, longs).unsqueeze(0) >
                      (at::arange(n, longs) + c0).unsqueeze(1);  // [n, keys]
    scores.masked_fill_(mask, -std::numeric_limits<float>::infinity());
    at::Tensor probs = at::softmax(scores, -1).view({Hkv, g * n, keys});
    out.narrow(2, c0, n).copy_(at::bmm(probs, v_scores.narrow(1, 0, keys)).view({Hkv, g, n, d}));
  }
  return out.view({Hq, L, d});
}

// The fused attention's scores never leave the chip, where the chunked attention writes and
// rereads [Hq, chunk, L] floats several times: on an H200 the 8B shape's prefill took 184 s at
// 128k tokens that way. Elsewhere (the CPU, f32, LibTorch 1.13) the chunked attention, the
// same on every version.
int fused_prefill_attention_kernel(const at::Tensor& q) {
#if TORCH_VERSION_MAJOR >= 2
  if (!q.is_cuda() || (q.scalar_type() != at::kBFloat16 && q.scalar_type() != at::kHalf))
    return -1;
  // ATen's choice for the call: K and V are repeated to q's shape, so q stands for them.
  const at::Tensor q4 = q.unsqueeze(0);
  return int(at::_fused_sdp_choice(q4, q4, q4, {}, 0.0, /*is_causal=*/true));
#else
  (void)q;
  return -1;
#endif
}

// is_causal: query i sees keys 0..i, the prompt starting at position 0; scale 1/sqrt(d), the
// call's default. K and V are repeated to the Hq query heads, [Hq, L, d] each for the call,
// rather than passed with enable_gqa (2.5+), which not every fused kernel takes: its fallback
// would hold [Hq, L, L] scores.
at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t g = q.size(0) / k.size(0);
  const at::Tensor k_rep = g == 1 ? k : k.repeat_interleave(g, 0);
  const at::Tensor v_rep = g == 1 ? v : v.repeat_interleave(g, 0);
  return at::scaled_dot_product_attention(q.unsqueeze(0), k_rep.unsqueeze(0), v_rep.unsqueeze(0),
                                          {}, 0.0, /*is_causal=*/true)[0];
#else
  (void)k;
  (void)v;
  throw std::logic_error("fused_causal_attention needs LibTorch 2.x");
#endif
}

}  // namespace kvb
