// KV-Compress (Rehg 2024, https://arxiv.org/abs/2410.00161; IsaacRe/vllm-kvcompress).
// "Evict blocks, not tokens, and let every layer and head keep a different number of them":
// a key's metric is the *squared* attention it received (L2 error of future attention), summed
// over the query heads of its GQA group so the KV is never repeated. Per (layer, KV head) the
// evictable metrics are sorted and cut into blocks of 16; blocks of all layers and heads compete
// in one ranking and the lowest are evicted until the whole cache fits B x layers x Hkv, so the
// budget varies per layer and per head while the paged cache really shrinks.
//   KVC-w (default): metric from the last w=8 prompt queries, max-pooled (k=7) per query head
//   over every key (so a protected key's score reaches the evictable keys beside it).
//   KVC-full: metric from every prompt query i >= j + v (v=10) for key j, no pooling.
// The last `protected` = 8 positions are never evicted. With `continual`, squared attention of
// decode queries keeps accumulating into the metrics and, before every decode step, whole
// blocks are re-evicted across all layers and heads at once (the vLLM fork's scheduler)
// whenever the cache outgrew (B - 1) x layers x Hkv. With `compression_rate` r the size comes
// from the prompt instead of B: max(min_cache_tokens, (int(L/r) - 1) // 16 * 16), as the fork's
// LongBench runner derives --max-cache-tokens from --compression-rate.
#include "methods/eviction/kv_compress.h"

#include <algorithm>
#include <numeric>

#include "methods/common/attention_scores.h"
#include "methods/common/eviction.h"
#include "methods/method.h"

namespace kvb {

at::Tensor KVCompressMetric::compute(const at::Tensor& q, const at::Tensor& k) const {
  const int64_t L = q.size(1);
  const int64_t pooled_keys =
      pool_scope == "all" ? L : std::max<int64_t>(0, L - protected_tail);
  at::Tensor per_query_head;  // [Hq, L]
  if (variant == "full") {
    per_query_head = column_attention_sum(q, k, power, skip_queries);
  } else {
    at::Tensor attention = window_attention(q, k, std::min<int64_t>(window, L));  // [Hq, w, L]
    per_query_head = attention.pow(power).sum(1);
    if (kernel > 1 && pooled_keys > 0) {
      at::Tensor pooled = pool1d(per_query_head.narrow(1, 0, pooled_keys).contiguous(), kernel,
                                 PoolMode::kMax);  // [Hq, pooled_keys]
      per_query_head.narrow(1, 0, pooled_keys).copy_(pooled);
    }
  }
  return reduce_query_groups(per_query_head, k.size(0), GroupReduce::kSum);  // [Hkv, L]
}

namespace {

// A unit of eviction: slots [begin, end) of a cell's ascending order of evictable entries.
struct EvictionUnit {
  float metric;
  size_t cell;
  int64_t begin, end;
};

// Evictable entries of `cell` (all but the protected tail), sorted by metric ascending, ties by
// logical index.
std::vector<int64_t> ascending_evictable(const EvictionCell& cell) {
  const int64_t n = int64_t(cell.metrics.size());
  std::vector<int64_t> order(std::max<int64_t>(0, n - cell.protected_tail));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cell.metrics[a] < cell.metrics[b]; });
  return order;
}

}  // namespace

std::vector<std::vector<int64_t>> plan_block_eviction(const std::vector<EvictionCell>& cells,
                                                      int64_t entries_to_evict,
                                                      int64_t block_size) {
  std::vector<std::vector<int64_t>> orders(cells.size());
  std::vector<EvictionUnit> units;
  for (size_t c = 0; c < cells.size(); ++c) {
    orders[c] = ascending_evictable(cells[c]);
    const int64_t n = int64_t(cells[c].metrics.size()), e = int64_t(orders[c].size());
    const int64_t empty = (block_size - n % block_size) % block_size;  // last block's free slots
    for (int64_t first_slot = 0; first_slot < empty + e; first_slot += block_size) {
      const int64_t begin = std::max<int64_t>(0, first_slot - empty);
      const int64_t end = std::min<int64_t>(e, first_slot + block_size - empty);
      if (end > begin) units.push_back({cells[c].metrics[orders[c][end - 1]], c, begin, end});
    }
  }
  // Stable: equal metrics keep (cell, unit) order, so a cell's units go in their own order.
  std::stable_sort(units.begin(), units.end(),
                   [](const EvictionUnit& a, const EvictionUnit& b) { return a.metric < b.metric; });

  std::vector<std::vector<bool>> evicted(cells.size());
  for (size_t c = 0; c < cells.size(); ++c) evicted[c].assign(cells[c].metrics.size(), false);
  int64_t count = 0;
  for (const EvictionUnit& unit : units) {
    if (count >= entries_to_evict) break;
    for (int64_t i = unit.begin; i < unit.end; ++i) evicted[unit.cell][orders[unit.cell][i]] = true;
    count += unit.end - unit.begin;
  }
  std::vector<std::vector<int64_t>> keep(cells.size());
  for (size_t c = 0; c < cells.size(); ++c)
    for (size_t i = 0; i < evicted[c].size(); ++i)
      if (!evicted[c][i]) keep[c].push_back(int64_t(i));
  return keep;
}

int64_t kvcompress_rate_budget(int64_t prompt_length, double rate, int64_t min_cache_tokens,
                               int64_t block_size) {
  const int64_t scaled = static_cast<int64_t>(double(prompt_length) / rate);  // int(L / r)
  return std::max(min_cache_tokens, (scaled - 1) / block_size * block_size);
}

namespace {

struct KVCompressConfig {
  KVCompressMetric metric;
  std::string aggregation = "l2";  // l2: squared attention (paper default) | l1
  bool continual = false;
  double compression_rate = 0.0;  // > 0 (>= 1): size the cache from L / rate, not from B
  int min_cache_tokens = 128;     // the smallest size the rate mode gives (the fork's runner)

  static const ConfigFields<KVCompressConfig>& fields() {
    using C = KVCompressConfig;
    static const auto f =
        ConfigFields<C>()
            .fields_of(&C::metric, metric_fields())
            .field("aggregation", &C::aggregation,
                   "l2: squared attention (the paper's default); l1: plain attention",
                   check::one_of({"l2", "l1"}))
            .field("continual", &C::continual,
                   "also evict while decoding, across all layers and heads (the paper's "
                   "continual compression)")
            .field("compression_rate", &C::compression_rate,
                   "0: size the cache from B; >= 1: keep about L / rate (the fork's runner)")
            .field("min_cache_tokens", &C::min_cache_tokens,
                   "the smallest cache the rate mode gives", check::at_least(1))
            .unused_when("min_cache_tokens", [](const C& c) { return c.compression_rate == 0.0; },
                         "compression_rate is 0 (B sizes the cache)")
            .rule([](C& c, const JsonFields& f) {
              if (!(c.compression_rate == 0.0 || c.compression_rate >= 1.0))
                throw InputError(f.path("compression_rate") +
                                 ": must be 0 (size from the budget) or >= 1 (keep about "
                                 "1/rate of the prompt), got " +
                                 std::to_string(c.compression_rate));
              c.metric.power = c.aggregation == "l2" ? 2.0 : 1.0;
            });
    return f;
  }
  static ConfigFields<KVCompressMetric> metric_fields() {
    using M = KVCompressMetric;
    return ConfigFields<M>()
        .field("variant", &M::variant,
               "w: the last `window` queries score, max-pooled; full: every query, no pooling",
               check::one_of({"w", "full"}))
        .field("window", &M::window, "KVC-w observation window", check::at_least(1))
        .field("kernel", &M::kernel, "KVC-w max-pooling kernel (1: none)",
               check::odd_at_least_one())
        .field("skip_queries", &M::skip_queries,
               "KVC-full: query i counts for key j only when i >= j + skip_queries",
               check::at_least(0))
        .field("protected", &M::protected_tail, "last prompt positions never evicted",
               check::at_least(0))
        .field("pool_scope", &M::pool_scope,
               "KVC-w pools over all keys, the protected ones too (the paper's eq. 8 and the "
               "fork's max_pool1d), or over the evictable ones only (kvbench before 2026-11-29)",
               check::one_of({"all", "evictable"}))
        .unused_when("window", [](const M& m) { return m.variant == "full"; },
                     "variant is \"full\" (every query scores)")
        .unused_when("kernel", [](const M& m) { return m.variant == "full"; },
                     "variant is \"full\" (no pooling)")
        .unused_when("pool_scope",
                     [](const M& m) {
                       return m.variant == "full" || m.kernel == 1 || m.protected_tail == 0;
                     },
                     "variant is \"full\", kernel is 1 (no pooling) or protected is 0 (all "
                     "keys are evictable)")
        .unused_when("skip_queries", [](const M& m) { return m.variant == "w"; },
                     "variant is \"w\" (the window's queries score)");
  }
  // In the rate mode B comes from the prompt; the smallest it can be is min_cache_tokens.
  void check_budget(int64_t budget, const std::string& where) const {
    const int64_t b = compression_rate > 0 ? min_cache_tokens : budget;
    const std::string what = compression_rate > 0
                                 ? "min_cache_tokens " + std::to_string(min_cache_tokens)
                                 : "the budget " + std::to_string(budget);
    if (metric.variant == "w" && metric.window >= b)
      throw InputError(where + ".window: window " + std::to_string(metric.window) +
                       " must be smaller than " + what);
    if (metric.protected_tail >= b)
      throw InputError(where + ".protected: " + std::to_string(metric.protected_tail) +
                       " protected positions leave no room in " + what +
                       " (the current token needs one slot)");
  }
};

class KVCompress : public Method {
 public:
  explicit KVCompress(const KVCompressConfig& c) : config_(c) {}

  void begin(const MethodContext& context) override {
    Method::begin(context);
    metrics_.assign(context.num_layers, {});
    received_.assign(context.num_layers, at::Tensor());
    budget_ = config_.compression_rate > 0
                  ? kvcompress_rate_budget(context.prompt_length, config_.compression_rate,
                                           config_.min_cache_tokens)
                  : context.budget;
    compress_ = context.prompt_length >= budget_;
  }

  // Metrics only; the eviction decision needs every layer (after_prefill).
  // q: [Hq, L, d], k, v: [Hkv, L, d].
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                  LayerKV&) override {
    if (!compress_ && !config_.continual) return;  // prompts shorter than B are not compressed
    at::Tensor metric = config_.metric.compute(q, k).to(at::kCPU, at::kFloat).contiguous();  // [Hkv, L]
    const int64_t L = metric.size(1);
    metrics_[layer].resize(metric.size(0));
    for (int64_t h = 0; h < metric.size(0); ++h) {
      const float* row = metric[h].data_ptr<float>();
      metrics_[layer][h].assign(row, row + L);
    }
  }

  // Keeps (B - 1) x layers x Hkv entries in all: one slot per (layer, head) is left for the
  // current decode token, as PrefillEviction does.
  void after_prefill(std::vector<LayerKV>& layers) override {
    if (compress_) evict(layers);
    if (!config_.continual) metrics_.clear();
  }

  bool wants_attention() const override { return config_.continual; }
  bool holds_step_tensors() const override { return false; }  // metrics of its own only

  // Continual compression, before each decode step as the fork's scheduler: when the cache
  // outgrew (B - 1) x layers x Hkv, whole blocks go, ranked across all layers and heads.
  void on_decode_step(std::vector<LayerKV>& layers) override {
    if (!config_.continual) return;
    add_received();
    evict(layers);
  }

  // The new token starts with metric 0 (it is protected while within the last positions).
  void on_append(int layer, const at::Tensor&, const at::Tensor&, LayerKV&) override {
    if (!config_.continual) return;
    for (auto& head_metrics : metrics_[layer]) head_metrics.push_back(0.0f);
  }

  // probs[h]: [g, n_h] over all resident entries of KV head h (logical order). Kept on the
  // device until the next step begins (add_received): no layer waits for the device.
  void on_attention(int layer, const Selection& selection, const std::vector<at::Tensor>& probs,
                    LayerKV&) override {
    if (!config_.continual || !selection.all) return;
    received_[size_t(layer)] = received_by_entry(probs, config_.metric.power);  // [sum of n_h]
  }

  // derived_budget: the B the compression rate gave this prompt (rate mode only).
  std::map<std::string, double> counters() const override {
    if (config_.compression_rate <= 0) return {};
    return {{"derived_budget", double(budget_)}};
  }

 private:
  // The attention the entries received at the last step, added to their metrics: every
  // layer's in one read of the device, made when the previous token has been read and the
  // device is idle. A layer's heads hold what they held at its on_attention.
  void add_received() {
    const PendingReads pending = take_pending_reads(received_);
    if (pending.layers.empty()) return;
    const float* p = pending.values.data_ptr<float>();
    for (size_t l : pending.layers)
      for (std::vector<float>& m : metrics_[l])
        for (float& value : m) value += *p++;
  }

  // Evicts blocks from every (layer, head) cell until the entries total at most
  // (B - 1) x layers x Hkv, and compacts the metrics alike.
  void evict(std::vector<LayerKV>& layers) {
    const int64_t target = (budget_ - 1) * int64_t(layers.size()) * context_.num_kv_heads;
    std::vector<EvictionCell> cells;
    int64_t total = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int h = 0; h < layers[l].num_heads(); ++h) {
        cells.push_back({metrics_[l][h], config_.metric.protected_tail});
        total += layers[l].size(h);
      }
    }
    if (total <= target) return;
    const auto keep = plan_block_eviction(cells, total - target);
    size_t c = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int h = 0; h < layers[l].num_heads(); ++h, ++c) {
        if (int64_t(keep[c].size()) == layers[l].size(h)) continue;
        layers[l].keep(h, keep[c]);
        std::vector<float>& m = metrics_[l][h];
        std::vector<float> kept(keep[c].size());
        for (size_t j = 0; j < keep[c].size(); ++j) kept[j] = m[keep[c][j]];
        m = std::move(kept);
      }
    }
  }

  KVCompressConfig config_;
  int64_t budget_ = 0;  // B: the cell's, or derived from the prompt in the rate mode
  bool compress_ = false;
  std::vector<std::vector<std::vector<float>>> metrics_;  // [layer][head][entry]
  std::vector<at::Tensor> received_;  // [layer]: the last step's attention, not yet in metrics_
};

KVB_REGISTER_METHOD(make_method_info<KVCompress, KVCompressConfig>({
    .name = "kv_compress",
    .title = "KV-Compress (Rehg 2024)",
    .paper = "https://arxiv.org/abs/2410.00161",
    .family = "eviction",
    .uses_budget = true,
    // Whole blocks: the last evicted one overshoots by < 16 entries in all (one block).
    .budget_tolerance = 16.0,
    .fidelity = "follows the paper: KVC-w default (w=8, max pool k=7 over every key, the "
                "protected ones too, as eq. 8 and the fork's max_pool1d; squared attention "
                "summed over the GQA group), 8 protected positions, blocks of 16 per (layer, head) "
                "ranked across all layers and heads with the last physical block's empty slots "
                "first (Fig. 5); KVC-full via variant (queries i >= j+10); continual compression "
                "re-evicts before every decode step across all layers and heads, as the "
                "vLLM fork's scheduler (compression_interval 1); compression_rate r sizes the "
                "cache per prompt as the fork's experiments/run_longbench.py "
                "(max(min_cache_tokens, (int(L/r) - 1) // 16 * 16)), used as B (the current "
                "token included), the budget axis then ignored",
    .presets = {
        {"paper",
         "the paper, arxiv.org/abs/2410.00161 Table 2's KVC-w8-L2 (the fork's runner defaults "
         "to w 32): observation window 8, squared attention summed over it, max pooling 7, "
         "blocks ranked across layers and heads",
         {{"variant", "w"}, {"window", 8}, {"kernel", 7}, {"aggregation", "l2"}}},
        {"vllm-kvcompress",
         "IsaacRe/vllm-kvcompress experiments/run_longbench.py defaults "
         "(--prefill-metric-collection-window-size 32, --protected-window-size 50, "
         "--metric-aggregation L2-sum, max pooling kernel 7 of "
         "vllm/attention/backends/flash_attn.py, compress once after prefill)",
         {{"variant", "w"}, {"window", 32}, {"kernel", 7}, {"aggregation", "l2"},
          {"protected", 50}, {"continual", false}}},
    },
}));

}  // namespace
}  // namespace kvb
