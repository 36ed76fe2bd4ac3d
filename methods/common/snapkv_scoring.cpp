#include "methods/common/snapkv_scoring.h"

namespace kvb {

const ConfigFields<SnapKVScoring>& SnapKVScoring::fields() {
  static const auto f =
      ConfigFields<SnapKVScoring>()
          .field("window", &SnapKVScoring::window,
                 "W: the last W prompt queries score the earlier keys; the window is kept",
                 check::at_least(1))
          .field("kernel", &SnapKVScoring::kernel, "pooling kernel along the keys",
                 check::odd_at_least_one())
          .field("pooling", &SnapKVScoring::pooling, "pooling of the scores",
                 check::one_of({"max", "avg"}))
          .field("group_reduce", &SnapKVScoring::group_reduce,
                 "reduction of a GQA group's scores to its KV head (per_kv_head)",
                 check::one_of({"mean", "max", "sum"}))
          .field("gqa", &SnapKVScoring::gqa,
                 "per_kv_head: one selection per KV head; per_query_head: each query head "
                 "selects, the KV head keeps the union (references that repeat the KV)",
                 check::one_of({"per_kv_head", "per_query_head"}))
          .unused_when("pooling", [](const SnapKVScoring& s) { return s.kernel == 1; },
                       "kernel is 1 (no pooling)")
          .unused_when("group_reduce", [](const SnapKVScoring& s) { return s.per_query_head(); },
                       "gqa is \"per_query_head\" (no group is reduced)");
  return f;
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
