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

  Selection select(int, const at::Tensor& q, const LayerKV& kv) override {
    Selection s;
    s.all = false;
    for (int h = 0; h < kv.num_heads(); ++h) {
      at::Tensor weights = group_attention_weights(q, kv, h);  // [n]
      s.per_head.push_back(top_k_indices(weights, context_.budget));
    }
    return s;
  }
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
