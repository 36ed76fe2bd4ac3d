// H2O: Heavy-Hitter Oracle (Zhang et al. 2023, https://arxiv.org/abs/2306.14048).
// "A few keys collect most of the attention mass, and they stay important": every key carries
// the attention it has received so far, summed over all queries (its heavy-hitter score). The
// cache keeps the heavy hitters plus a window of the most recent tokens.
//
// Modes:
//  - decode (default; the reference's real-drop mode): after prefill keep heavy + recent; at
//    every decode step add the new attention row to the scores and, when the cache exceeds the
//    budget, evict the lowest-scoring entry outside the recent window. heavy = recent = B/2.
//  - prefill (KVCache-Factory style): after prefill keep the last `window` tokens plus the top
//    B - window keys by score over all L queries (with a correct causal mask), then no more
//    evictions.
// GQA: scores per query head summed over the group of the KV head (the reference has no GQA).
#include <algorithm>
#include <numeric>

#include "engine/common/json_fields.h"
#include "methods/common/attention_scores.h"
#include "methods/common/prefill_eviction.h"
#include "methods/method.h"

namespace kvb {
namespace {

struct H2OConfig {
  std::string mode = "decode";
  double heavy_ratio = 0.5;  // decode mode: share of B for heavy hitters, the rest is recent
  int window = 8;            // prefill mode: recent tokens always kept

  static const ConfigFields<H2OConfig>& fields() {
    static const auto f =
        ConfigFields<H2OConfig>()
            .field("mode", &H2OConfig::mode,
                   "decode: evict one entry per step while generating (the reference); prefill: "
                   "keep the window plus the top B - window by prompt attention, once",
                   check::one_of({"decode", "prefill"}))
            .field("heavy_ratio", &H2OConfig::heavy_ratio,
                   "decode mode: share of B for heavy hitters, the rest recent",
                   check::in_interval("(0, 1)"))
            .field("window", &H2OConfig::window, "prefill mode: recent tokens always kept",
                   check::at_least(1));
    return f;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    if (mode == "prefill" && window >= budget)
      throw InputError(where + ".window: window " + std::to_string(window) +
                       " must be smaller than the budget " + std::to_string(budget));
    if (mode == "decode" && (heavy(budget) < 1 || budget - heavy(budget) < 1))
      throw InputError(where + ".heavy_ratio: budget " + std::to_string(budget) +
                       " leaves no heavy or no recent entry");
  }
  int64_t heavy(int64_t budget) const { return int64_t(double(budget) * heavy_ratio); }
};

class H2O : public Method {
 public:
  explicit H2O(const H2OConfig& c) : config_(c) {}

  void begin(const MethodContext& context) override {
    Method::begin(context);
    scores_.assign(context.num_layers, std::vector<std::vector<float>>(context.num_kv_heads));
  }

  bool wants_attention() const override { return config_.mode == "decode"; }

  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                  LayerKV& kv) override {
    // Heavy-hitter score of each prompt key: attention summed over all L queries. [Hkv, L]
    at::Tensor scores = reduce_query_groups(column_attention_sum(q, k), k.size(0),
                                            GroupReduce::kSum).to(at::kCPU).contiguous();
    const int64_t L = q.size(1);
    // The current decode token joins the recent window: keep one slot free for it.
    const int64_t tail = config_.mode == "prefill" ? config_.window : recent() - 1;
    const int64_t top = context_.budget - 1 - tail;
    for (int h = 0; h < kv.num_heads(); ++h) {
      std::vector<float>& s = scores_[layer][h];
      s.assign(scores[h].data_ptr<float>(), scores[h].data_ptr<float>() + L);
      if (L < context_.budget) continue;  // prompts shorter than B are not compressed
      std::vector<int64_t> kept = keep_top_and_tail(kv, h, scores[h].narrow(0, 0, L - tail), top);
      s = gather(s, kept);
    }
  }

  void on_append(int layer, const at::Tensor&, const at::Tensor&, LayerKV&) override {
    for (auto& s : scores_[layer]) s.push_back(0.0f);
  }

  // Decode mode: accumulate this step's attention, then evict down to B - 1 so the next token
  // fits. Selection was "everything", so probs[h] covers all entries in logical order.
  void on_attention(int layer, const Selection&, const std::vector<at::Tensor>& probs,
                    LayerKV& kv) override {
    const at::Tensor received = received_by_entry(probs);  // every head's [n_h], one copy
    const float* r = received.data_ptr<float>();
    std::vector<std::vector<int64_t>> kept(size_t(kv.num_heads()));
    for (int h = 0; h < kv.num_heads(); ++h) {
      std::vector<float>& s = scores_[layer][h];
      for (size_t i = 0; i < s.size(); ++i) s[i] += *r++;
      kept[size_t(h)] = evict_lowest(s, context_.budget - 1);
    }
    // One row move for the layer's heads (heads keeping everything untouched), each moving the
    // shorter side of its victim.
    kv.keep(kept, Compaction::kShorterSide);
  }

 private:
  int64_t recent() const { return context_.budget - config_.heavy(context_.budget); }

  // Drops the lowest-scoring entry outside the recent window (ties: the oldest) until `cap`
  // remain; s loses the victims' scores. Returns the logical indices kept.
  std::vector<int64_t> evict_lowest(std::vector<float>& s, int64_t cap) const {
    std::vector<int64_t> kept(s.size());
    std::iota(kept.begin(), kept.end(), int64_t(0));
    while (int64_t(s.size()) > cap) {
      const int64_t candidates = int64_t(s.size()) - (recent() - 1);
      const int64_t victim = std::min_element(s.begin(), s.begin() + candidates) - s.begin();
      s.erase(s.begin() + victim);
      kept.erase(kept.begin() + victim);
    }
    return kept;
  }

  static std::vector<float> gather(const std::vector<float>& s, const std::vector<int64_t>& idx) {
    std::vector<float> out;
    for (int64_t i : idx) out.push_back(s[i]);
    return out;
  }

  H2OConfig config_;
  std::vector<std::vector<std::vector<float>>> scores_;  // [layer][kv head][resident entry]
};

KVB_REGISTER_METHOD(make_method_info<H2O, H2OConfig>({
    .name = "h2o",
    .title = "H2O: Heavy-Hitter Oracle (Zhang et al. 2023)",
    .paper = "https://arxiv.org/abs/2306.14048",
    .family = "eviction",
    .uses_budget = true,
    .fidelity = "decode mode follows the reference's real-drop eviction (heavy = recent = B/2); "
                "prefill mode follows KVCache-Factory with the full causal mask (its older "
                "last-W-rows masking bug is not reproduced); GQA scores summed over the group",
    .presets = {
        {"fminference",
         "FMInference/H2O h2o_hf/utils_real_drop/modify_llama.py (H2OKVCache_LayerWise: "
         "attention accumulated per key, the lowest outside the recent window dropped as the "
         "cache grows; hh_size = recent_size = B/2)",
         {{"mode", "decode"}, {"heavy_ratio", 0.5}}},
        {"kvcache-factory",
         "Zefan-Cai/KVCache-Factory run_longbench.py (window_sizes 8) with H2OKVCluster of "
         "pyramidkv/pyramidkv_utils.py: the window plus the top keys by attention summed over "
         "all prompt queries, once after prefill (no pooling); it repeats the KV and selects "
         "per query head, kvbench per KV head with the group's scores summed",
         {{"mode", "prefill"}, {"window", 8}}},
    },
}));

}  // namespace
}  // namespace kvb
