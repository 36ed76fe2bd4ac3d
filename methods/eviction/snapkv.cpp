// SnapKV (Li et al. 2024, https://arxiv.org/abs/2404.14469).
// "The attention a prompt's last few queries pay to earlier keys predicts what generation will
// need": after prefill, score each key by the window queries' attention (pooled so neighbours
// of important tokens survive together), keep the top B - W keys per KV head plus the window.
// Defaults follow KVCache-Factory's LongBench runner (W=8, k=7, max pooling); SnapKV's own
// configs use W=32. GQA: scores reduced to the KV head before pooling; KV is never repeated.
#include "methods/common/prefill_eviction.h"
#include "methods/common/snapkv_scoring.h"

namespace kvb {
namespace {

struct SnapKVConfig {
  SnapKVScoring scoring;

  static SnapKVConfig from_json(const json& j, const std::string& where) {
    SnapKVConfig c;
    JsonFields f(j, where);
    c.scoring.read(f);
    f.finish();
    return c;
  }
  json to_json() const {
    json j = json::object();
    scoring.write(j);
    return j;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    scoring.check_budget(budget, where);
  }
};

class SnapKV : public PrefillEviction {
 public:
  explicit SnapKV(const SnapKVConfig& c) : config_(c) {}

 protected:
  int64_t window() const override { return config_.scoring.window; }
  at::Tensor score(int, const at::Tensor& q, const at::Tensor& k) override {
    return config_.scoring.score(q, k);  // [Hkv, L - W]
  }

 private:
  SnapKVConfig config_;
};

KVB_REGISTER_METHOD(make_method_info<SnapKV, SnapKVConfig>({
    .name = "snapkv",
    .title = "SnapKV (Li et al. 2024)",
    .paper = "https://arxiv.org/abs/2404.14469",
    .family = "eviction",
    .uses_budget = true,
    .fidelity = "faithful to KVCache-Factory's runner (W=8, k=7, max pool); W=32 via config; "
                "GQA scores reduced before pooling (group_reduce)",
}));

}  // namespace
}  // namespace kvb
