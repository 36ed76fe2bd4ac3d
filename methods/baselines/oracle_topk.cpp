// Oracle top-k: at every decode step and KV head, attend to the B keys with the largest true
// attention weight (softmax of q.k over all resident keys, summed over the GQA group).
// The ideal selection of B keys. (PQCache's tables compare with an oracle of their own, which
// keeps the sinks and a local window and takes the true top-k of the keys between: a weaker
// one where the window holds keys the plain top-B would not take.)
#include "engine/kernel_adapter.h"
#include "methods/common/config.h"
#include "methods/common/selection.h"
#include "methods/method.h"

namespace kvb {
namespace {

class OracleTopK : public Method {
 public:
  explicit OracleTopK(const EmptyConfig&) {}
  bool holds_step_tensors() const override { return false; }  // q is used where it is given

  // Top-B per KV head on the device, ascending; a head at or under B attends to everything it
  // holds. Ties at the B-th weight go to the earlier entries on every device (top_k_ascending:
  // one kernel on a GPU, where ATen's topk and a sort took about 15 launches a layer).
  // Equally filled heads (the usual case: Oracle evicts nothing) are ranked together.
  Selection select(int, const at::Tensor& q, const LayerKV& kv) override {
    bool over_budget = false, uniform = true;
    for (int h = 0; h < kv.num_heads(); ++h) {
      over_budget = over_budget || kv.size(h) > context_.budget;
      uniform = uniform && kv.size(h) == kv.size(0);
    }
    if (!over_budget) return Selection::everything();
    if (uniform) {  // every head at once: [Hkv, B]
      const at::Tensor weights = group_attention_weights(q, kv);  // [Hkv, n] fp32
      return Selection::from_rows(top_k_ascending(weights, context_.budget, 0, 0), false, &indptr_);
    }
    std::vector<std::vector<int64_t>> lists;  // ragged heads: through the host
    for (int h = 0; h < kv.num_heads(); ++h)
      lists.push_back(top_k_indices(group_attention_weights(q, kv, h), context_.budget));
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
    .fidelity = "exact by definition: true top-B by attention weight summed over the GQA group; "
                "ties at the B-th weight to the earlier entries, on every device",
}));

}  // namespace
}  // namespace kvb
