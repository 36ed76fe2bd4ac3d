#include "methods/common/snapkv_scoring.h"

namespace kvb {

void SnapKVScoring::read(JsonFields& f) {
  f.get("window", window);
  f.get("kernel", kernel);
  f.get("pooling", pooling);
  f.get("group_reduce", group_reduce);
  if (window < 1) throw InputError(f.path("window") + ": must be >= 1");
  if (kernel < 1 || kernel % 2 == 0)
    throw InputError(f.path("kernel") + ": pooling kernel must be odd and >= 1, got " +
                     std::to_string(kernel));
  parse_pool_mode(pooling, f.path("pooling"));
  parse_group_reduce(group_reduce, f.path("group_reduce"));
}

void SnapKVScoring::write(json& j) const {
  j["window"] = window;
  j["kernel"] = kernel;
  j["pooling"] = pooling;
  j["group_reduce"] = group_reduce;
}

void SnapKVScoring::check_budget(int64_t budget, const std::string& where) const {
  if (window >= budget)
    throw InputError(where + ".window: window " + std::to_string(window) +
                     " must be smaller than the budget " + std::to_string(budget));
}

at::Tensor SnapKVScoring::score(const at::Tensor& q, const at::Tensor& k) const {
  const int64_t L = q.size(1);
  at::Tensor attention = window_attention(q, k, window);            // [Hq, W, L]
  at::Tensor per_query_head = attention.sum(1).narrow(1, 0, L - window);  // [Hq, L - W]
  at::Tensor per_kv_head = reduce_query_groups(per_query_head, k.size(0),
                                               parse_group_reduce(group_reduce, "group_reduce"));
  return pool1d(per_kv_head, kernel, parse_pool_mode(pooling, "pooling"));  // [Hkv, L - W]
}

}  // namespace kvb
