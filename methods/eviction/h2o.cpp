// H2O: Heavy-Hitter Oracle (Zhang et al. 2023, https://arxiv.org/abs/2306.14048).
// "A few keys collect most of the attention mass, and they stay important": every key carries
// the attention it has received so far, summed over all queries (its heavy-hitter score). The
// cache keeps the heavy hitters plus a window of the most recent tokens.
//
// Modes:
//  - decode (default; the reference's real-drop mode): after prefill keep heavy + recent; at
//    every decode step add the new attention row to the scores and, when the cache exceeds the
//    budget, evict the lowest-scoring entry outside the recent window. heavy = recent = B/2.
//    The scores live on the device; a step's victims are chosen there and evicted at the start
//    of the next step (on_decode_step), before that step's token is appended.
//  - prefill (KVCache-Factory style): after prefill keep the last `window` tokens plus the top
//    B - window keys by score over all L queries (with a correct causal mask), then no more
//    evictions.
// GQA: scores per query head summed over the group of the KV head (the reference has no GQA).
#include <stdexcept>

#include "engine/common/json_fields.h"
#include "engine/device.h"
#include "methods/common/attention_scores.h"
#include "methods/common/eviction.h"
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
                   check::at_least(1))
            .unused_when("heavy_ratio", [](const H2OConfig& c) { return c.mode == "prefill"; },
                         "mode is \"prefill\"")
            .unused_when("window", [](const H2OConfig& c) { return c.mode == "decode"; },
                         "mode is \"decode\" (heavy_ratio splits B)");
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
    scores_.assign(context.num_layers, at::Tensor());
    victims_.assign(context.num_layers, at::Tensor());
  }

  bool wants_attention() const override { return config_.mode == "decode"; }
  bool holds_step_tensors() const override { return false; }  // scores of its own only

  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                  LayerKV& kv) override {
    // Heavy-hitter score of each prompt key: attention summed over all L queries.
    const at::Tensor scores =
        reduce_query_groups(column_attention_sum(q, k), k.size(0), GroupReduce::kSum)
            .to(at::kFloat);  // [Hkv, L], on the device
    const int64_t L = q.size(1);
    const bool decode = config_.mode == "decode";
    if (decode) scores_[layer] = scores;
    if (L < context_.budget) return;  // prompts shorter than B are not compressed
    // The current decode token joins the recent window: keep one slot free for it.
    const int64_t tail = decode ? recent() - 1 : config_.window;
    const int64_t top = context_.budget - 1 - tail;
    const at::Tensor host = scores.to(at::kCPU).contiguous();
    std::vector<int64_t> kept;  // every head's kept entries, in their new logical order
    for (int h = 0; h < kv.num_heads(); ++h) {
      const std::vector<int64_t> head = keep_top_and_tail(kv, h, host[h].narrow(0, 0, L - tail), top);
      kept.insert(kept.end(), head.begin(), head.end());
    }
    if (decode)  // each head keeps top + tail entries
      scores_[layer] =
          scores.gather(1, host_to_device(kept, scores.device()).view({kv.num_heads(), -1}));
  }

  // Decode mode: the step's evictions, chosen on the device by the previous step's
  // on_attention, applied before its token is appended (the attended entries are what an
  // eviction right after the attention would leave). The victims of all layers reach the host
  // in one read, made when the previous token has been read and the device is idle: no layer
  // waits for the device.
  void on_decode_step(std::vector<LayerKV>& layers) override {
    const PendingReads pending = take_pending_reads(victims_);
    if (pending.layers.empty()) return;
    const int64_t* victim = pending.values.data_ptr<int64_t>();  // [layers with victims, Hkv]
    for (size_t l : pending.layers) {
      LayerKV& kv = layers[l];
      std::vector<LayerKV::EntryRange> dropped;
      for (int h = 0; h < kv.num_heads(); ++h, ++victim) dropped.push_back({*victim, *victim + 1});
      // One row move for the layer's heads, each moving the shorter side of its victim.
      kv.drop(dropped, Compaction::kShorterSide);
    }
  }

  void on_append(int layer, const at::Tensor&, const at::Tensor&, LayerKV&) override {
    at::Tensor& s = scores_[layer];
    if (s.defined()) s = at::constant_pad_nd(s, {0, 1});  // the new entry's score: 0
  }

  // Decode mode: accumulate this step's attention; when the cache holds more than B - 1
  // entries (so the next token would not fit), choose each head's victim: the lowest score
  // outside the recent window, the oldest on ties. Selection was "everything", so probs[h]
  // covers all entries of head h in logical order. Device ops only: no read of the device.
  void on_attention(int layer, const Selection&, const std::vector<at::Tensor>& probs,
                    LayerKV& kv) override {
    if (!kv.equally_filled())  // H2O's heads evict in step: they always hold alike
      throw std::logic_error("h2o: the KV heads of layer " + std::to_string(layer) +
                             " hold different counts");
    at::Tensor& s = scores_[layer];                    // [Hkv, n]
    s.add_(at::stack(probs).to(at::kFloat).sum(1));  // probs: Hkv x [g, n]
    const int64_t n = kv.size(0), cap = context_.budget - 1;
    if (n <= cap) return;
    if (n > cap + 1)
      throw std::logic_error("h2o: layer " + std::to_string(layer) + " holds " +
                             std::to_string(n) + " entries, more than B");
    const at::Tensor victim =
        s.narrow(1, 0, n - (recent() - 1)).argmin(1, /*keepdim=*/true);  // [Hkv, 1]
    if (!column_.defined() || column_.size(1) != n - 1 || column_.device() != s.device())
      column_ = at::arange(n - 1, victim.options()).unsqueeze(0);  // [1, n - 1]
    s = s.gather(1, column_ + column_.ge(victim));  // the victim's score dropped
    victims_[size_t(layer)] = victim.view({-1});
  }

 private:
  int64_t recent() const { return context_.budget - config_.heavy(context_.budget); }

  H2OConfig config_;
  std::vector<at::Tensor> scores_;  // decode mode: per layer [Hkv, resident entries], fp32
  // Per layer: [Hkv] int64, each head's entry to evict when the next step begins (undefined:
  // none pending).
  std::vector<at::Tensor> victims_;
  at::Tensor column_;  // [1, n - 1]: 0 .. n - 2, the entries' indices after an eviction
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
