// KV-Compress (Rehg 2024, https://arxiv.org/abs/2410.00161; IsaacRe/vllm-kvcompress).
// "Evict blocks, not tokens, and let every layer and head keep a different number of them":
// a key's metric is the *squared* attention it received (L2 error of future attention), summed
// over the query heads of its GQA group so the KV is never repeated. Per (layer, KV head) the
// evictable metrics are sorted and cut into blocks of 16; blocks of all layers and heads compete
// in one ranking and the lowest are evicted until the whole cache fits B x layers x Hkv, so the
// budget varies per layer and per head while the paged cache really shrinks.
//   KVC-w (default): metric from the last w=8 prompt queries, max-pooled (k=7) per query head.
//   KVC-full: metric from every prompt query i >= j + v (v=10) for key j, no pooling.
// The last `protected` = 8 positions are never evicted. With `continual`, squared attention of
// decode queries keeps accumulating into the metrics and whole blocks are re-evicted during
// decoding (per layer, across its heads) whenever a layer outgrows its prefill allocation.
#include "methods/eviction/kv_compress.h"

#include <algorithm>
#include <numeric>

#include "harness/common/json_fields.h"
#include "methods/common/attention_scores.h"
#include "methods/method.h"

namespace kvb {

at::Tensor KVCompressMetric::compute(const at::Tensor& q, const at::Tensor& k) const {
  const int64_t L = q.size(1);
  const int64_t evictable = std::max<int64_t>(0, L - protected_tail);
  at::Tensor per_query_head;  // [Hq, L]
  if (variant == "full") {
    per_query_head = column_attention_sum(q, k, power, skip_queries);
  } else {
    at::Tensor attention = window_attention(q, k, std::min<int64_t>(window, L));  // [Hq, w, L]
    per_query_head = attention.pow(power).sum(1);
    if (kernel > 1 && evictable > 0) {
      at::Tensor pooled = pool1d(per_query_head.narrow(1, 0, evictable).contiguous(), kernel,
                                 PoolMode::kMax);  // [Hq, L - protected]
      per_query_head.narrow(1, 0, evictable).copy_(pooled);
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

namespace {

struct KVCompressConfig {
  KVCompressMetric metric;
  std::string aggregation = "l2";  // l2: squared attention (paper default) | l1
  bool continual = false;

  static KVCompressConfig from_json(const json& j, const std::string& where) {
    KVCompressConfig c;
    JsonFields f(j, where);
    f.get("variant", c.metric.variant);
    f.get("window", c.metric.window);
    f.get("kernel", c.metric.kernel);
    f.get("aggregation", c.aggregation);
    f.get("skip_queries", c.metric.skip_queries);
    f.get("protected", c.metric.protected_tail);
    f.get("continual", c.continual);
    f.finish();
    if (c.metric.variant != "w" && c.metric.variant != "full")
      throw InputError(f.path("variant") + ": \"" + c.metric.variant + "\" is not one of w, full");
    if (c.metric.window < 1)
      throw InputError(f.path("window") + ": must be >= 1, got " + std::to_string(c.metric.window));
    if (c.metric.kernel < 1 || c.metric.kernel % 2 == 0)
      throw InputError(f.path("kernel") + ": pooling kernel must be odd and >= 1, got " +
                       std::to_string(c.metric.kernel));
    if (c.aggregation != "l2" && c.aggregation != "l1")
      throw InputError(f.path("aggregation") + ": \"" + c.aggregation + "\" is not one of l2, l1");
    c.metric.power = c.aggregation == "l2" ? 2.0 : 1.0;
    if (c.metric.skip_queries < 0)
      throw InputError(f.path("skip_queries") + ": must be >= 0, got " +
                       std::to_string(c.metric.skip_queries));
    if (c.metric.protected_tail < 0)
      throw InputError(f.path("protected") + ": must be >= 0, got " +
                       std::to_string(c.metric.protected_tail));
    return c;
  }
  json to_json() const {
    return {{"variant", metric.variant},          {"window", metric.window},
            {"kernel", metric.kernel},            {"aggregation", aggregation},
            {"skip_queries", metric.skip_queries}, {"protected", metric.protected_tail},
            {"continual", continual}};
  }
  void check_budget(int64_t budget, const std::string& where) const {
    if (metric.variant == "w" && metric.window >= budget)
      throw InputError(where + ".window: window " + std::to_string(metric.window) +
                       " must be smaller than the budget " + std::to_string(budget));
    if (metric.protected_tail >= budget)
      throw InputError(where + ".protected: " + std::to_string(metric.protected_tail) +
                       " protected positions leave no room in budget " + std::to_string(budget) +
                       " (the current token needs one slot)");
  }
};

class KVCompress : public Method {
 public:
  explicit KVCompress(const KVCompressConfig& c) : config_(c) {}

  void begin(const MethodContext& context) override {
    Method::begin(context);
    metrics_.assign(context.num_layers, {});
    allowance_.assign(context.num_layers, 0);
    compress_ = context.prompt_length >= context.budget;
  }

  // Metrics only; the eviction decision needs every layer (after_prefill).
  // q: [Hq, L, d], k, v: [Hkv, L, d].
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                  LayerKV&) override {
    if (!compress_ && !config_.continual) return;  // prompts shorter than B are not compressed
    at::Tensor metric = config_.metric.compute(q, k).to(at::kFloat).contiguous();  // [Hkv, L]
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
    const int64_t heads = context_.num_kv_heads;
    if (compress_) {
      std::vector<size_t> all_layers(layers.size());
      std::iota(all_layers.begin(), all_layers.end(), 0);
      const int64_t target = (context_.budget - 1) * int64_t(layers.size()) * heads;
      evict(layers, all_layers, target, config_.metric.protected_tail);
    }
    for (size_t l = 0; l < layers.size(); ++l)
      allowance_[l] = compress_ ? layers[l].entries() + heads : context_.budget * heads;
    if (!config_.continual) metrics_.clear();
  }

  bool wants_attention() const override { return config_.continual; }

  // Continual compression: the new token starts with metric 0; if the layer now holds more than
  // its allowance, whole blocks go (the current token is always protected).
  void on_append(int layer, const at::Tensor&, const at::Tensor&, LayerKV& kv) override {
    if (!config_.continual) return;
    for (auto& head_metrics : metrics_[layer]) head_metrics.push_back(0.0f);
    if (kv.entries() <= allowance_[layer]) return;
    std::vector<LayerKV*> one{&kv};
    evict_cells(one, {size_t(layer)}, allowance_[layer],
                std::max(config_.metric.protected_tail, 1));
  }

  // probs[h]: [g, n_h] over all resident entries of KV head h (logical order).
  void on_attention(int layer, const Selection& selection, const std::vector<at::Tensor>& probs,
                    LayerKV&) override {
    if (!config_.continual || !selection.all) return;
    for (size_t h = 0; h < probs.size(); ++h) {
      at::Tensor add = probs[h].to(at::kFloat).pow(config_.metric.power).sum(0).contiguous();  // [n_h]
      std::vector<float>& m = metrics_[layer][h];
      const float* p = add.data_ptr<float>();
      for (size_t i = 0; i < m.size(); ++i) m[i] += p[i];
    }
  }

 private:
  void evict(std::vector<LayerKV>& layers, const std::vector<size_t>& which, int64_t target,
             int64_t protected_tail) {
    std::vector<LayerKV*> ptrs;
    for (size_t l : which) ptrs.push_back(&layers[l]);
    evict_cells(ptrs, which, target, protected_tail);
  }

  // Evicts blocks from the (layer, head) cells of `kvs` (layers `which`) until their entries
  // total at most `target`, and compacts the metrics alike.
  void evict_cells(const std::vector<LayerKV*>& kvs, const std::vector<size_t>& which,
                   int64_t target, int64_t protected_tail) {
    std::vector<EvictionCell> cells;
    int64_t total = 0;
    for (size_t i = 0; i < kvs.size(); ++i) {
      for (int h = 0; h < kvs[i]->num_heads(); ++h) {
        cells.push_back({metrics_[which[i]][h], protected_tail});
        total += kvs[i]->size(h);
      }
    }
    if (total <= target) return;
    const auto keep = plan_block_eviction(cells, total - target);
    size_t c = 0;
    for (size_t i = 0; i < kvs.size(); ++i) {
      for (int h = 0; h < kvs[i]->num_heads(); ++h, ++c) {
        if (int64_t(keep[c].size()) == kvs[i]->size(h)) continue;
        kvs[i]->keep(h, keep[c]);
        std::vector<float>& m = metrics_[which[i]][h];
        std::vector<float> kept(keep[c].size());
        for (size_t j = 0; j < keep[c].size(); ++j) kept[j] = m[keep[c][j]];
        m = std::move(kept);
      }
    }
  }

  KVCompressConfig config_;
  bool compress_ = false;
  std::vector<std::vector<std::vector<float>>> metrics_;  // [layer][head][entry]
  std::vector<int64_t> allowance_;  // per layer: entries a decode step may attend to
};

KVB_REGISTER_METHOD(make_method_info<KVCompress, KVCompressConfig>({
    .name = "kv_compress",
    .title = "KV-Compress (Rehg 2024)",
    .paper = "https://arxiv.org/abs/2410.00161",
    .family = "eviction",
    .uses_budget = true,
    // Whole blocks: the last evicted one overshoots by < 16 entries in all (one block).
    .budget_tolerance = 16.0,
    .fidelity = "follows the paper: KVC-w default (w=8, max pool k=7, squared attention summed "
                "over the GQA group), 8 protected positions, blocks of 16 per (layer, head) "
                "ranked across all layers and heads with the last physical block's empty slots "
                "first (Fig. 5); KVC-full via variant (queries i >= j+10); continual compression "
                "evicts per layer across its heads, not across layers; budget given as B only "
                "(no compression-ratio option)",
}));

}  // namespace
}  // namespace kvb
