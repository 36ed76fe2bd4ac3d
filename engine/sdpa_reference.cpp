#include "engine/sdpa_reference.h"

#include <torch/version.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine/phase_clock.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define KVBENCH_SDPA_GQA 1
#else
#define KVBENCH_SDPA_GQA 0
#endif

namespace kvb {

bool sdpa_reference_available() { return KVBENCH_SDPA_GQA; }

std::optional<double> sdpa_decode_seconds(at::Device device, at::ScalarType dtype,
                                          int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          int64_t context, int calls) {
  if (q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0 || head_dim <= 0 ||
      context <= 0 || calls <= 0)
    throw std::invalid_argument(
        "sdpa_decode_seconds: needs a positive context, head_dim and calls, and q_heads a "
        "multiple of kv_heads");
#if KVBENCH_SDPA_GQA
  const at::TensorOptions options = at::TensorOptions(device).dtype(dtype);
  const at::Tensor q = at::randn({1, q_heads, 1, head_dim}, options);
  const at::Tensor k = at::randn({1, kv_heads, context, head_dim}, options);
  const at::Tensor v = at::randn({1, kv_heads, context, head_dim}, options);
  const auto attend = [&] {
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, false, std::nullopt,
                                            /*enable_gqa=*/true);
  };
  attend();
  PhaseClock clock(device);
  std::vector<double> seconds(size_t(calls), 0.0);
  for (double& s : seconds) {
    const PhaseClock::Mark start = clock.mark();
    attend();
    clock.add_since(start, &s);
  }
  clock.settle();
  std::nth_element(seconds.begin(), seconds.begin() + calls / 2, seconds.end());
  return seconds[size_t(calls / 2)];
#else
  (void)device;
  (void)dtype;
  return std::nullopt;
#endif
}

}  // namespace kvb
