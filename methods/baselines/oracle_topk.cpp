// Oracle top-k: at every decode step and KV head, attend to the B keys with the largest true
// attention weight (softmax of q.k over all resident keys, summed over the GQA group).
// The ideal selection: the upper bound in PQCache's tables.
#include "methods/common/config.h"
#include "methods/common/selection.h"
#include "methods/method.h"

namespace kvb {
namespace {

class OracleTopK : public Method {
 public:
  explicit OracleTopK(const EmptyConfig&) {}
  bool holds_step_tensors() const override { return false; }  // q is used where it is given

  // Top-B per KV head on the device (top-k, then ascending order); a head at or under B attends
  // to everything it holds. Equally filled heads (the usual case: Oracle evicts nothing) are
  // ranked together.
  Selection select(int, const at::Tensor& q, const LayerKV& kv) override {
    bool over_budget = false, uniform = true;
    for (int h = 0; h < kv.num_heads(); ++h) {
      over_budget = over_budget || kv.size(h) > context_.budget;
      uniform = uniform && kv.size(h) == kv.size(0);
    }
    if (!over_budget) return Selection::everything();
    if (uniform) {  // every head at once: [Hkv, B]
      at::Tensor weights = group_attention_weights(q, kv);  // [Hkv, n]
      const at::Tensor top = std::get<1>(at::topk(weights, context_.budget, /*dim=*/1));
      return Selection::from_rows(std::get<0>(at::sort(top, /*dim=*/1)), false, &indptr_);
    }
    std::vector<at::Tensor> rows;  // per KV head, [min(B, n_h)] ascending logical indices
    for (int h = 0; h < kv.num_heads(); ++h) {
      at::Tensor weights = group_attention_weights(q, kv, h);  // [n]
      const int64_t k = std::min(context_.budget, kv.size(h));
      rows.push_back(std::get<0>(at::sort(std::get<1>(at::topk(weights, k)))));
    }
    std::vector<std::vector<int64_t>> lists;  // ragged heads: through the host
    for (const at::Tensor& r : rows) {
      at::Tensor host = r.to(at::kCPU).contiguous();
      lists.emplace_back(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
    }
    return Selection::from_lists(lists, false, kv.key_pool().device());
  }

 private:
  EqualCountsIndptr indptr_;  // [Hkv + 1] offsets of B each: every layer and step the same
};

KVB_REGISTER_METHOD(make_method_info<OracleTopK, EmptyConfig>({
    .name = "oracle_topk",
    .title = "Oracle top-k",
    .paper = "",
    .family = "baseline",
    .uses_budget = true,
    .fidelity = "exact by definition: true top-B by attention weight summed over the GQA group",
}));

}  // namespace
}  // namespace kvb
