#include "methods/common/snapkv_scoring.h"

namespace kvb {

void SnapKVScoring::read(JsonFields& f) {
  f.get("window", window);
  f.get("kernel", kernel);
  f.get("pooling", pooling);
  f.get("group_reduce", group_reduce);
  f.get("gqa", gqa);
  if (window < 1) throw InputError(f.path("window") + ": must be >= 1");
  if (kernel < 1 || kernel % 2 == 0)
    throw InputError(f.path("kernel") + ": pooling kernel must be odd and >= 1, got " +
                     std::to_string(kernel));
  parse_pool_mode(pooling, f.path("pooling"));
  parse_group_reduce(group_reduce, f.path("group_reduce"));
  if (gqa != "per_kv_head" && gqa != "per_query_head")
    throw InputError(f.path("gqa") + ": \"" + gqa + "\" is not one of per_kv_head, per_query_head");
}

void SnapKVScoring::write(json& j) const {
  j["window"] = window;
  j["kernel"] = kernel;
  j["pooling"] = pooling;
  j["group_reduce"] = group_reduce;
  j["gqa"] = gqa;
}

void SnapKVScoring::check_budget(int64_t budget, const std::string& where) const {
  if (window >= budget)
    throw InputError(where + ".window: window " + std::to_string(window) +
                     " must be smaller than the budget " + std::to_string(budget));
}

at::Tensor SnapKVScoring::score(const at::Tensor& q, const at::Tensor& k) const {
  const int64_t L = q.size(1);
  at::Tensor attention = window_attention(q, k, window);            // [Hq, W, L]
  at::Tensor per_query = attention.sum(1).narrow(1, 0, L - window);  // [Hq, L - W]
  const PoolMode mode = parse_pool_mode(pooling, "pooling");
  if (per_query_head()) return pool1d(per_query, kernel, mode);  // [Hq, L - W]
  at::Tensor per_kv = reduce_query_groups(per_query, k.size(0),
                                          parse_group_reduce(group_reduce, "group_reduce"));
  return pool1d(per_kv, kernel, mode);  // [Hkv, L - W]
}

}  // namespace kvb
