// Quest (Tang et al. 2024, https://arxiv.org/abs/2406.10774; mit-han-lab/Quest).
// "Which tokens matter depends on the query": the KV cache is cut into pages of 16 consecutive
// tokens from position 0, and each page keeps the per-channel minimum and maximum of its keys.
// At a decode step, sum_c max(q_c * kmax_c, q_c * kmin_c) bounds q.k of every key in the page
// from above, so the pages with the largest bounds are fetched and attended; the current (last,
// partial) page is always attended. Layers 0 and 1 attend to everything (as in the paper).
//
// In the harness (see `fidelity` below):
// - The budget B counts entries: the current page contributes its filled entries, then whole
//   pages by score; the room left (< 16) is filled with the leading entries of the next-ranked
//   page, so every sparse head attends exactly B (`fill_budget`, default). With
//   `fill_budget: false` the reference kernel's rule applies: floor(B/16) pages in all, the
//   current one included, so a head attends between B - 15 - B%16 and B - B%16 entries.
// - GQA: the reference repeats KV and selects per query head. Default: one selection per KV
//   head with the group's query heads' page scores summed. `per_query_head`: each query head
//   ranks the pages itself and the KV head attends the union, built rank by rank across the
//   group's query heads until B is reached (so the budget keeps its meaning: B per KV head).
#include "methods/retrieval/quest.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "harness/engine/kernel_adapter.h"
#include "methods/common/config.h"
#include "methods/common/retrieval.h"

namespace kvb {

std::pair<at::Tensor, at::Tensor> quest_page_summaries(const at::Tensor& k, int64_t page_size) {
  const int64_t H = k.size(0), n = k.size(1), d = k.size(2);
  const int64_t full = n / page_size, rest = n % page_size;
  at::Tensor kf = k.to(at::kFloat);
  std::vector<at::Tensor> mins, maxs;
  if (full > 0) {
    at::Tensor pages = kf.narrow(1, 0, full * page_size).reshape({H, full, page_size, d});
    mins.push_back(std::get<0>(pages.min(2)));  // [H, full, d]
    maxs.push_back(std::get<0>(pages.max(2)));
  }
  if (rest > 0) {
    at::Tensor last = kf.narrow(1, full * page_size, rest);  // [H, rest, d]
    mins.push_back(std::get<0>(last.min(1, /*keepdim=*/true)));  // [H, 1, d]
    maxs.push_back(std::get<0>(last.max(1, /*keepdim=*/true)));
  }
  if (mins.empty()) return {at::empty({H, 0, d}, at::kFloat), at::empty({H, 0, d}, at::kFloat)};
  return {at::cat(mins, 1), at::cat(maxs, 1)};
}

at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax) {
  at::Tensor qf = q.to(at::kFloat);
  // max(q_c * hi, q_c * lo) = q_c * hi when q_c >= 0, q_c * lo otherwise.
  at::Tensor q_pos = qf.clamp_min(0), q_neg = qf.clamp_max(0);  // [H, g, d]
  return at::bmm(q_pos, kmax.to(at::kFloat).transpose(1, 2)) +
         at::bmm(q_neg, kmin.to(at::kFloat).transpose(1, 2));  // [H, g, P]
}

std::vector<int64_t> quest_rank_pages(const at::Tensor& scores) {
  at::Tensor s = scores.to(at::kFloat).contiguous();
  const float* p = s.data_ptr<float>();
  std::vector<int64_t> order(std::max<int64_t>(s.numel() - 1, 0));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [p](int64_t a, int64_t b) { return p[a] > p[b]; });
  return order;
}

std::vector<int64_t> quest_select_pages(const std::vector<std::vector<int64_t>>& rankings,
                                        int64_t n, int64_t page_size, int64_t budget,
                                        bool fill_budget) {
  if (budget < page_size || n <= budget)
    throw std::logic_error("quest_select_pages: needs n > budget >= page_size");
  const int64_t pages = (n + page_size - 1) / page_size;
  const int64_t current = pages - 1, current_fill = n - current * page_size;
  std::vector<int64_t> out;
  // Entries the other pages may use: exactly B - current_fill, or whole pages up to
  // floor(B / page_size) - 1 of them (the reference kernel).
  int64_t room = fill_budget ? budget - current_fill : (budget / page_size - 1) * page_size;
  std::vector<char> taken(pages, 0);
  taken[current] = 1;
  size_t rank = 0;
  bool more = true;
  while (room > 0 && more) {
    more = false;
    for (const std::vector<int64_t>& ranking : rankings) {
      if (rank >= ranking.size()) continue;
      more = true;
      const int64_t page = ranking[rank];
      if (taken[page]) continue;
      taken[page] = 1;
      const int64_t count = std::min(room, page_size);  // a trimmed page only when filling
      for (int64_t i = 0; i < count; ++i) out.push_back(page * page_size + i);
      room -= count;
      if (room <= 0) break;
    }
    ++rank;
  }
  for (int64_t i = current * page_size; i < n; ++i) out.push_back(i);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

struct QuestConfig {
  int64_t page_size = 16;
  bool per_query_head = false;
  bool fill_budget = true;

  static QuestConfig from_json(const json& j, const std::string& where) {
    QuestConfig c;
    JsonFields f(j.is_null() ? json::object() : j, where);
    f.get("page_size", c.page_size);
    f.get("per_query_head", c.per_query_head);
    f.get("fill_budget", c.fill_budget);
    f.finish();
    if (c.page_size < 1)
      throw InputError(f.path("page_size") + ": must be >= 1, got " + std::to_string(c.page_size));
    return c;
  }
  json to_json() const {
    return {{"page_size", page_size}, {"per_query_head", per_query_head},
            {"fill_budget", fill_budget}};
  }
  void check_budget(int64_t budget, const std::string& where) const {
    if (budget < page_size)
      throw InputError(where + ".page_size: budget " + std::to_string(budget) +
                       " must hold at least one page of " + std::to_string(page_size) +
                       " entries (the current page is always attended)");
  }
};

class Quest : public RetrievalMethod {
 public:
  explicit Quest(const QuestConfig& c) : config_(c) {}

  void begin(const MethodContext& context) override {
    RetrievalMethod::begin(context);
    config_.check_budget(context.budget, "quest");
    index_.assign(context.num_layers, PageIndex{});
  }

  // k: [Hkv, L, d]. Builds the page summaries of the prompt.
  void on_prefill(int layer, const at::Tensor&, const at::Tensor& k, const at::Tensor&,
                  LayerKV& kv) override {
    if (layer < dense_layers()) return;
    PageIndex& ix = index_[layer];
    auto [kmin, kmax] = quest_page_summaries(k, config_.page_size);  // [Hkv, P, d] each
    ix.pages = kmin.size(1);
    ix.entries = k.size(1);
    const int64_t capacity = ix.pages + 64;
    ix.kmin = at::empty({k.size(0), capacity, k.size(2)}, at::kFloat);
    ix.kmax = at::empty({k.size(0), capacity, k.size(2)}, at::kFloat);
    ix.kmin.narrow(1, 0, ix.pages).copy_(kmin);
    ix.kmax.narrow(1, 0, ix.pages).copy_(kmax);
    account(layer, kv);
  }

  // k: [Hkv, d]. Widens the last page's summary, or opens a new page.
  void on_append(int layer, const at::Tensor& k, const at::Tensor&, LayerKV& kv) override {
    if (layer < dense_layers()) return;
    PageIndex& ix = index_[layer];
    at::Tensor kf = k.to(at::kFloat);  // [Hkv, d]
    if (ix.entries % config_.page_size == 0) {
      if (ix.pages == ix.kmin.size(1)) {  // grow ×2
        at::Tensor kmin = at::empty({ix.kmin.size(0), 2 * ix.pages + 1, ix.kmin.size(2)}, at::kFloat);
        at::Tensor kmax = at::empty_like(kmin);
        kmin.narrow(1, 0, ix.pages).copy_(ix.kmin.narrow(1, 0, ix.pages));
        kmax.narrow(1, 0, ix.pages).copy_(ix.kmax.narrow(1, 0, ix.pages));
        ix.kmin = kmin;
        ix.kmax = kmax;
      }
      ix.kmin.select(1, ix.pages).copy_(kf);
      ix.kmax.select(1, ix.pages).copy_(kf);
      ++ix.pages;
      account(layer, kv);
    } else {
      at::Tensor lo = ix.kmin.select(1, ix.pages - 1), hi = ix.kmax.select(1, ix.pages - 1);
      lo.copy_(at::minimum(lo, kf));
      hi.copy_(at::maximum(hi, kf));
    }
    ++ix.entries;
  }

 protected:
  // q: [Hq, d]. Every head of this family holds the same entries (nothing is evicted).
  std::vector<std::vector<int64_t>> select_sparse(int layer, const at::Tensor& q,
                                                  const LayerKV& kv,
                                                  const std::vector<int>& heads) override {
    const PageIndex& ix = index_[layer];
    const int64_t Hkv = kv.num_heads(), g = q.size(0) / Hkv, d = q.size(1);
    for (int h : heads)
      if (kv.size(h) != ix.entries)
        throw std::logic_error("quest: page index out of step with the KV store");
    at::Tensor kmin = ix.kmin.narrow(1, 0, ix.pages), kmax = ix.kmax.narrow(1, 0, ix.pages);
    at::Tensor scores;  // [Hkv, g, P], or [Hkv, 1, P] summed over the group
    if (quest_page_scores_supported(kmin, kmax) && q.device().is_cpu()) {
      scores = quest_page_scores_kernel(q.reshape({Hkv, g, d}), kmin, kmax,
                                        /*sum_group=*/!config_.per_query_head);
    } else {
      scores = quest_page_scores(q.reshape({Hkv, g, d}), kmin, kmax);
      if (!config_.per_query_head) scores = scores.sum(1, /*keepdim=*/true);
    }
    std::vector<std::vector<int64_t>> out;
    for (int h : heads) {
      std::vector<std::vector<int64_t>> rankings;
      for (int64_t j = 0; j < scores.size(1); ++j) rankings.push_back(quest_rank_pages(scores[h][j]));
      out.push_back(quest_select_pages(rankings, ix.entries, config_.page_size, context_.budget,
                                       config_.fill_budget));
    }
    return out;
  }

 private:
  struct PageIndex {
    at::Tensor kmin, kmax;  // [Hkv, capacity, d] float32; pages 0..pages-1 in use
    int64_t pages = 0;
    int64_t entries = 0;    // entries summarised (== every head's size)
  };

  // Index bytes: the min and max summaries, in the keys' dtype, as a GPU deployment keeps them.
  void account(int layer, const LayerKV& kv) {
    const PageIndex& ix = index_[layer];
    set_index_bytes(layer, 2 * int64_t(kv.num_heads()) * ix.pages * kv.head_dim() *
                               int64_t(kv.key_pool().element_size()));
  }

  QuestConfig config_;
  std::vector<PageIndex> index_;  // per layer
};

KVB_REGISTER_METHOD(make_method_info<Quest, QuestConfig>({
    .name = "quest",
    .title = "Quest (Tang et al. 2024)",
    .paper = "https://arxiv.org/abs/2406.10774",
    .family = "retrieval",
    .uses_budget = true,
    .budget_tolerance = 0.0,
    .dense_layers = 2,
    .fidelity = "pages of 16 with per-channel min/max keys, score sum_c max(q_c*kmax_c, "
                "q_c*kmin_c), current page always attended and counted, layers 0-1 dense (as the "
                "reference); B is met exactly by filling the room left after whole pages with the "
                "leading entries of the next-ranked page (fill_budget=false: the reference's "
                "floor(B/16) pages incl. the current one, <= B); GQA: group's scores summed per KV "
                "head (per_query_head: per-query-head rankings merged rank by rank up to B)",
}));

}  // namespace
}  // namespace kvb
