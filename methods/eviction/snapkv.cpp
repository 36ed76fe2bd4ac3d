// SnapKV (Li et al. 2024, https://arxiv.org/abs/2404.14469).
// "The attention a prompt's last few queries pay to earlier keys predicts what generation will
// need": after prefill, score each key by the window queries' attention (pooled so neighbours
// of important tokens survive together), keep the top B - W keys per KV head plus the window.
// Defaults follow KVCache-Factory's LongBench runner (W=8, k=7, max pooling); SnapKV's own
// configs use W=32. GQA: scores reduced to the KV head before pooling; KV is never repeated
// (`gqa: per_query_head` selects per query head, as the references that repeat it).
#include "methods/common/snapkv_scoring.h"

namespace kvb {
namespace {

struct SnapKVConfig {
  SnapKVScoring scoring;

  static const ConfigFields<SnapKVConfig>& fields() {
    static const auto f =
        ConfigFields<SnapKVConfig>().fields_of(&SnapKVConfig::scoring, SnapKVScoring::fields());
    return f;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    scoring.check_budget(budget, where);
  }
};

class SnapKV : public SnapKVScoredEviction {
 public:
  explicit SnapKV(const SnapKVConfig& c) : SnapKVScoredEviction(c.scoring) {}
};

KVB_REGISTER_METHOD(make_method_info<SnapKV, SnapKVConfig>({
    .name = "snapkv",
    .title = "SnapKV (Li et al. 2024)",
    .paper = "https://arxiv.org/abs/2404.14469",
    .family = "eviction",
    .uses_budget = true,
    .fidelity = "faithful to KVCache-Factory's runner (W=8, k=7, max pool); W=32 via config; "
                "GQA scores reduced before pooling (group_reduce), one selection per KV head "
                "(gqa: per_query_head selects per query head, as the references that repeat "
                "the KV)",
    .presets = {
        {"kvcache-factory",
         "Zefan-Cai/KVCache-Factory run_longbench.py (window_sizes 8, kernel_sizes 7, pooling "
         "maxpool) with SnapKVCluster of pyramidkv/pyramidkv_utils.py; its default "
         "--kv_cache_granularity query_head repeats the KV before compressing: per query head",
         {{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"gqa", "per_query_head"}}},
        {"kvpress",
         "NVIDIA/kvpress kvpress/presses/snapkv_press.py (window_size 64, kernel_size 5, "
         "avg_pool1d, scores averaged over the GQA group: per KV head); kvpress sizes the cache "
         "by compression_ratio, kvbench by B",
         {{"window", 64}, {"kernel", 5}, {"pooling", "avg"}, {"group_reduce", "mean"},
          {"gqa", "per_kv_head"}}},
        {"fasterdecoding",
         "FasterDecoding/SnapKV experiments/LongBench/pred_snap.py with its "
         "ablation_c<B>_w32_k7_maxpool.json configs (window 32, kernel 7, max pooling); "
         "snapkv/monkeypatch/*_hijack_4_37.py repeats the KV before update_kv: per query head",
         {{"window", 32}, {"kernel", 7}, {"pooling", "max"}, {"gqa", "per_query_head"}}},
    },
}));

}  // namespace
}  // namespace kvb
