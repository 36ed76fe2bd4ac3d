// StreamingLLM (Xiao et al. 2023, https://arxiv.org/abs/2309.17453): keep the first `sinks`
// tokens (attention sinks) and the most recent B - sinks tokens; evict everything between.
// The prompt is prefilled densely, then cut to the window; by default the window then rolls
// at every decode step, the paper's rolling KV cache (mit-han-lab/streaming-llm evicts per
// token where it feeds text token by token, eval_long_ppl.py). `decode_eviction: false` cuts
// only after the prefill and lets the cache grow while decoding, as KVCache-Factory's
// StreamingLLM does (pyramidkv_utils.py, called at prefill only).
#include "methods/common/config.h"
#include "methods/common/eviction.h"
#include "methods/method.h"

namespace kvb {
namespace {

struct StreamingLLMConfig {
  int sinks = 4;
  bool decode_eviction = true;  // the window rolls at every decode step (false: prefill only)

  static const ConfigFields<StreamingLLMConfig>& fields() {
    using C = StreamingLLMConfig;
    static const auto f =
        ConfigFields<C>()
            .field("sinks", &C::sinks, "first tokens always kept (attention sinks)",
                   check::at_least(0))
            .field("decode_eviction", &C::decode_eviction,
                   "the window rolls at every decode step, the paper's rolling cache (false: "
                   "cut after the prefill only, the cache grows while decoding, as "
                   "KVCache-Factory)");
    return f;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    if (budget <= sinks)
      throw InputError(where + ".sinks: " + std::to_string(sinks) + " sinks leave no room in budget " +
                       std::to_string(budget));
  }
};

class StreamingLLM : public Method {
 public:
  explicit StreamingLLM(const StreamingLLMConfig& c) : config_(c) {}

  void begin(const MethodContext& context) override {
    Method::begin(context);
    config_.check_budget(context.budget, "streaming_llm");
  }

  // After prefill keep B - 1 entries, so that with the next token appended a step attends to B.
  void on_prefill(int, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                  LayerKV& kv) override {
    keep_sinks_and_recent(kv, config_.sinks, context_.budget - 1);
  }

  // One entry goes per step: the sinks move, not the recent entries.
  void on_append(int, const at::Tensor&, const at::Tensor&, LayerKV& kv) override {
    if (config_.decode_eviction)
      keep_sinks_and_recent(kv, config_.sinks, context_.budget, Compaction::kShorterSide);
  }

  bool holds_step_tensors() const override { return false; }  // it moves rows, keeps nothing

 private:
  StreamingLLMConfig config_;
};

KVB_REGISTER_METHOD(make_method_info<StreamingLLM, StreamingLLMConfig>({
    .name = "streaming_llm",
    .title = "StreamingLLM (Xiao et al. 2023)",
    .paper = "https://arxiv.org/abs/2309.17453",
    .family = "baseline",
    .uses_budget = true,
    .fidelity = "faithful: 4 sinks + most recent B-4, evicted for real after the dense prefill "
                "and at every decode step (the paper's rolling cache; decode_eviction: false "
                "cuts after the prefill only, as KVCache-Factory)",
    .presets = {
        {"mit-han-lab",
         "mit-han-lab/streaming-llm streaming_llm/enable_streaming_llm.py (start_size 4, the "
         "rest recent); its pos_shift re-rotation of cached keys is not reproduced: keys keep "
         "their original positions",
         {{"sinks", 4}}},
        {"kvcache-factory",
         "Zefan-Cai/KVCache-Factory pyramidkv_utils.py StreamingLLMKVCluster (the first B - "
         "window and the last window = B - 4 tokens, kept once after the prefill; the cache "
         "grows while decoding)",
         {{"sinks", 4}, {"decode_eviction", false}}},
    },
}));

}  // namespace
}  // namespace kvb
