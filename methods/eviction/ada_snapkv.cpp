// Ada-SnapKV (Feng et al. 2024, "Ada-KV", https://arxiv.org/abs/2407.11550; FFY0/AdaKV).
// "Heads differ in how concentrated their attention is": with SnapKV's scores, a layer's budget
// Hkv x (B - W) is shared across its heads by a flattened top-k over all heads' scores, so a
// focused head gives slots to a dispersed one. A floor (alpha = 0.2 of B - W) keeps every head
// alive. The cache really is ragged: each head of LayerKV holds its own number of entries.
// Defaults follow the authors' code, FFY0/AdaKV as its LongBench pred.py runs it: W=32, k=7,
// max pooling, alpha=0.2, no score normalisation (KVCache-Factory's port: W=8, normalize on,
// preset ada_snapkv:kvcache-factory).
#include "methods/eviction/ada_snapkv.h"

#include <cmath>

#include "methods/common/attention_scores.h"
#include "methods/common/snapkv_scoring.h"

namespace kvb {

namespace {

// Each head's scores times the share of its mass in its own top `base`. scores: [H, n].
at::Tensor normalised_scores(const at::Tensor& scores, int64_t base) {
  at::Tensor s = scores.to(at::kFloat);
  const int64_t top = std::min<int64_t>(base, s.size(1));
  at::Tensor top_mass = std::get<0>(at::topk(s, top, 1)).sum(1, /*keepdim=*/true);  // [H, 1]
  return s * (top_mass / s.sum(1, /*keepdim=*/true));
}

}  // namespace

std::vector<int64_t> ada_head_capacities(const at::Tensor& scores, int64_t budget,
                                         int64_t window, double alpha, bool normalize) {
  const int64_t heads = scores.size(0);
  const int64_t base = budget - window;                             // B'
  const int64_t floor_cap = static_cast<int64_t>(double(base) * alpha);  // int(B' * alpha)
  const std::vector<int64_t> counts = flattened_allocation(
      normalize ? normalised_scores(scores, base) : scores, heads * base);  // c_h
  std::vector<int64_t> caps(heads);
  for (int64_t h = 0; h < heads; ++h)
    caps[h] = static_cast<int64_t>(std::nearbyint(double(counts[h]) * (1.0 - alpha) + floor_cap));
  return caps;
}

namespace {

struct AdaSnapKVConfig {
  SnapKVScoring scoring{/*window=*/32};  // FFY0/AdaKV's W; KVCache-Factory's runner uses 8
  double alpha = 0.2;     // floor share of B - W every head keeps
  bool normalize = false;  // reweight heads by their top-B' mass share (KVCache-Factory: on)

  static const ConfigFields<AdaSnapKVConfig>& fields() {
    static const auto f =
        ConfigFields<AdaSnapKVConfig>()
            .fields_of(&AdaSnapKVConfig::scoring, SnapKVScoring::fields())
            .field("alpha", &AdaSnapKVConfig::alpha, "floor share of B - W every head keeps",
                   check::in_interval("[0, 1]"))
            .field("normalize", &AdaSnapKVConfig::normalize,
                   "reweight heads by their top-B' attention mass share (KVCache-Factory: on)")
            .unused_when("normalize", [](const AdaSnapKVConfig& c) { return c.alpha == 1.0; },
                         "alpha is 1 (every head keeps B - W, whatever its scores)");
    return f;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    if (scoring.window >= budget)  // a hint beside SnapKV's message: the default W is 32 here
      throw InputError(where + ".window: window " + std::to_string(scoring.window) +
                       " must be smaller than the budget " + std::to_string(budget) +
                       " (FFY0/AdaKV's default is 32; ada_snapkv:kvcache-factory uses 8)");
  }
};

class AdaSnapKV : public SnapKVScoredEviction {
 public:
  explicit AdaSnapKV(const AdaSnapKVConfig& c) : SnapKVScoredEviction(c.scoring), config_(c) {}

 protected:
  // scores: [Hkv or Hq, L - W]: the layer's heads share H x (B - W) scored slots.
  std::vector<int64_t> capacities(int, const at::Tensor& scores) override {
    return ada_head_capacities(scores, context_.budget, window(), config_.alpha,
                               config_.normalize);
  }

 private:
  AdaSnapKVConfig config_;
};

KVB_REGISTER_METHOD(make_method_info<AdaSnapKV, AdaSnapKVConfig>({
    .name = "ada_snapkv",
    .title = "Ada-SnapKV (Feng et al. 2024)",
    .paper = "https://arxiv.org/abs/2407.11550",
    .family = "eviction",
    .uses_budget = true,
    // int(B' * alpha) drops < 1 and round() moves <= 0.5 per head, as in the reference.
    .budget_tolerance = 1.5,
    .fidelity = "faithful to the authors' code FFY0/AdaKV as its LongBench pred.py runs it "
                "(W=32, k=7, max pool, flattened top Hkv(B-W), alpha=0.2 floor, round, no "
                "normalize); per-head budgets held ragged for real; GQA as FFY0's --gqa_support "
                "(scores averaged over the group before pooling, one selection per KV head; "
                "gqa: per_query_head as its default without it); rounding can move a layer's "
                "total by a few entries, as in the reference",
    .presets = {
        {"ffy0",
         "FFY0/AdaKV experiments/LongBench/pred.py (--floor_alpha 0.2, without --gqa_support: "
         "the KV repeated, per query head) with config_compress of "
         "adaptive_snapkv/monkeypatch/monkeypatch.py (window 32, kernel 7, maxpool, normalize "
         "None)",
         {{"window", 32}, {"kernel", 7}, {"pooling", "max"}, {"alpha", 0.2},
          {"normalize", false}, {"gqa", "per_query_head"}}},
        {"ffy0-gqa",
         "FFY0/AdaKV experiments/LongBench/GQA_eval_longbench.sh (pred.py --gqa_support, "
         "gqa_func mean: scores averaged over the group, one selection per KV head; window 32, "
         "kernel 7, maxpool, floor_alpha 0.2, normalize None); the default",
         {{"window", 32}, {"kernel", 7}, {"pooling", "max"}, {"alpha", 0.2},
          {"normalize", false}, {"group_reduce", "mean"}, {"gqa", "per_kv_head"}}},
        {"kvcache-factory",
         "Zefan-Cai/KVCache-Factory run_longbench.py (window_sizes 8, kernel_sizes 7, pooling "
         "maxpool) with AdaKVCluster and init_adakv of pyramidkv/pyramidkv_utils.py "
         "(floor_ratio 0.2, normalize True); its default --kv_cache_granularity query_head: "
         "per query head",
         {{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"alpha", 0.2},
          {"normalize", true}, {"gqa", "per_query_head"}}},
    },
}));

}  // namespace
}  // namespace kvb
