// Full KV cache: no compression. The reference for scores and for recall.
#include "methods/common/config.h"
#include "methods/method.h"

namespace kvb {
namespace {

class Full : public Method {
 public:
  explicit Full(const EmptyConfig&) {}
  bool holds_step_tensors() const override { return false; }  // it has no decode hooks
};

KVB_REGISTER_METHOD(make_method_info<Full, EmptyConfig>({
    .name = "full",
    .title = "Full KV cache",
    .paper = "",
    .family = "baseline",
    .uses_budget = false,
    .fidelity = "exact: attends to every entry",
}));

}  // namespace
}  // namespace kvb
