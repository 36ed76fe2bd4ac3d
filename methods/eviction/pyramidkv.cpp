// PyramidKV (Cai et al. 2024, https://arxiv.org/abs/2406.02069).
// "Attention funnels: lower layers spread attention over the whole prompt, upper layers focus on
// a few tokens", so the cache is a pyramid: SnapKV's observation-window score decides which keys
// stay, and the number kept falls linearly from the first layer to the last, the total staying
// that of uniform SnapKV. Capacities follow the reference's integer arithmetic
// (KVCache-Factory, pyramidkv/pyramidkv_utils.py), beta = 20.
#include "methods/eviction/pyramidkv.h"

#include "methods/common/snapkv_scoring.h"

namespace kvb {

std::vector<int64_t> pyramid_capacities(int64_t budget, int64_t window, int64_t prompt_length,
                                        int num_layers, int beta) {
  const int64_t base = budget - window;
  if (num_layers < 2 || prompt_length < 2 * base) return std::vector<int64_t>(num_layers, base);
  int64_t min_cap = base / beta;
  int64_t max_cap = 2 * base - min_cap;
  if (max_cap >= prompt_length - window) {
    max_cap = prompt_length - window;
    min_cap = 2 * base - max_cap;
  }
  const int64_t steps = (max_cap - min_cap) / (num_layers - 1);
  std::vector<int64_t> caps(num_layers);
  for (int l = 0; l < num_layers; ++l) caps[l] = max_cap - l * steps;
  return caps;
}

namespace {

struct PyramidKVConfig {
  SnapKVScoring scoring;
  int beta = 20;  // min capacity = (B - W) / beta at the top layer

  static const ConfigFields<PyramidKVConfig>& fields() {
    static const auto f =
        ConfigFields<PyramidKVConfig>()
            .fields_of(&PyramidKVConfig::scoring, SnapKVScoring::fields())
            .field("beta", &PyramidKVConfig::beta,
                   "the top layer keeps (B - W) / beta, capacities fall linearly to it",
                   check::at_least(1));
    return f;
  }
  void check_budget(int64_t budget, const std::string& where) const {
    scoring.check_budget(budget, where);
  }
};

class PyramidKV : public SnapKVScoredEviction {
 public:
  explicit PyramidKV(const PyramidKVConfig& c) : SnapKVScoredEviction(c.scoring), config_(c) {}

 protected:
  // scores: [Hkv or Hq, L - W]; every head of layer `layer` gets cap_l.
  std::vector<int64_t> capacities(int layer, const at::Tensor& scores) override {
    const int64_t L = scores.size(1) + window();
    const std::vector<int64_t> caps = pyramid_capacities(
        context_.budget, window(), L, context_.num_layers, config_.beta);
    return std::vector<int64_t>(scores.size(0), caps[layer]);
  }

 private:
  PyramidKVConfig config_;
};

KVB_REGISTER_METHOD(make_method_info<PyramidKV, PyramidKVConfig>({
    .name = "pyramidkv",
    .title = "PyramidKV (Cai et al. 2024)",
    .paper = "https://arxiv.org/abs/2406.02069",
    .family = "eviction",
    .uses_budget = true,
    // The floor in `steps` leaves the mean capacity above B - W by half the remainder of
    // (max - min) / (layers - 1): at most (layers - 2) / 2 (0.5 on random-tiny's 4 layers,
    // up to 15 on 32 layers); recorded by the measured budget.
    .budget_tolerance = 1.0,
    .fidelity = "faithful to KVCache-Factory (W=8, k=7, max pool, beta=20, its integer capacity "
                "arithmetic, uniform SnapKV when L < 2(B-W)); the floor in `steps` makes the "
                "mean capacity slightly above B-W, as in the reference (measured budget shows "
                "it); GQA scores reduced before pooling, one selection per KV head (gqa: "
                "per_query_head as the reference's default query_head granularity)",
    .presets = {
        {"kvcache-factory",
         "Zefan-Cai/KVCache-Factory run_longbench.py (window_sizes 8, kernel_sizes 7, pooling "
         "maxpool) with PyramidKVCluster of pyramidkv/pyramidkv_utils.py (beta 20); its default "
         "--kv_cache_granularity query_head repeats the KV before compressing: per query head",
         {{"window", 8}, {"kernel", 7}, {"pooling", "max"}, {"beta", 20},
          {"gqa", "per_query_head"}}},
    },
}));

}  // namespace
}  // namespace kvb
