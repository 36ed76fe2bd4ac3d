// Quest (Tang et al. 2024, https://arxiv.org/abs/2406.10774; mit-han-lab/Quest).
// "Which tokens matter depends on the query": the KV cache is cut into pages of 16 consecutive
// tokens from position 0, and each page keeps the per-channel minimum and maximum of its keys.
// At a decode step, sum_c max(q_c * kmax_c, q_c * kmin_c) bounds q.k of every key in the page
// from above, so the pages with the largest bounds are fetched and attended; the current (last,
// partial) page is always attended. Layers 0 and 1 attend to everything (as in the paper).
//
// In the harness (see `fidelity` below):
// - `selection` (what B buys):
//   kernel (default; the reference's kernel path, the spec's default): floor(B/P) pages in
//     all (P = page_size, 16), the current one included and counted, so a head attends
//     (floor(B/P) - 1) x P + the current page's filled entries: between B - P + 1 - B%P and
//     B - B%P.
//   fill (a kvbench option, not in the reference): the current page, whole pages by score, and
//     the room left (< 16) filled with the leading entries of the next-ranked page: exactly B.
//   evaluation (the reference's accuracy-evaluation path, evaluation/quest_attention.py, which
//     produced the paper's accuracy numbers): each query head takes its top max(3, B/16) pages,
//     the current page a candidate like any other (not forced: the current token may go
//     unattended, as there).
//   Every selection applies only where a head holds more than B entries (the spec's "prompts
//   shorter than B are not compressed"): the reference kernel goes sparse as soon as the pages
//   outnumber floor(B/P), so where B is not a multiple of P and floor(B/P) x P < n <= B it
//   attends fewer entries than kvbench's dense head; its evaluation path always selects, so
//   there it drops the lowest-ranked page even when all n <= B entries would fit.
// - GQA: the reference repeats KV and selects per query head. Default: one selection per KV
//   head with the group's query heads' page scores summed. `gqa: per_query_head`: as the reference,
//   each query head ranks the pages itself and attends only to its own selection (B per query
//   head; a KV head's entries are fetched once for its group, counted as their union).
// - A decode key is folded into the summaries by the next selection's scoring (one launch on a
//   GPU) where select_rows runs, else in on_append: the same summaries either way.
#include "methods/retrieval/quest.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "engine/kernel_adapter.h"
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
  const at::TensorOptions floats = k.options().dtype(at::kFloat);
  if (mins.empty()) return {at::empty({H, 0, d}, floats), at::empty({H, 0, d}, floats)};
  return {at::cat(mins, 1), at::cat(maxs, 1)};
}

std::vector<int64_t> quest_rank_pages(const at::Tensor& scores, bool with_current) {
  at::Tensor s = scores.to(at::kCPU, at::kFloat).contiguous();
  const float* p = s.data_ptr<float>();
  std::vector<int64_t> order(std::max<int64_t>(s.numel() - (with_current ? 0 : 1), 0));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [p](int64_t a, int64_t b) { return p[a] > p[b]; });
  return order;
}

namespace {

// The entries of `page` (the last one possibly partial), `count` of them at most.
void append_page(std::vector<int64_t>& out, int64_t page, int64_t n, int64_t page_size,
                 int64_t count) {
  const int64_t end = std::min(n, page * page_size + count);
  for (int64_t i = page * page_size; i < end; ++i) out.push_back(i);
}

}  // namespace

std::vector<int64_t> quest_select_pages(const std::vector<int64_t>& ranking, int64_t n,
                                        int64_t page_size, int64_t budget, bool fill_budget) {
  if (budget < page_size || n <= budget)
    throw std::logic_error("quest_select_pages: needs n > budget >= page_size");
  const int64_t current = (n - 1) / page_size, current_fill = n - current * page_size;
  // Entries the other pages may use: whole pages up to floor(B / page_size) - 1 of them (the
  // reference kernel), or exactly B - current_fill.
  int64_t room = fill_budget ? budget - current_fill : (budget / page_size - 1) * page_size;
  std::vector<int64_t> out;
  for (size_t r = 0; r < ranking.size() && room > 0; ++r) {
    const int64_t count = std::min(room, page_size);  // a trimmed page only when filling
    append_page(out, ranking[r], n, page_size, count);
    room -= count;
  }
  append_page(out, current, n, page_size, page_size);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> quest_evaluation_pages(const std::vector<int64_t>& ranking, int64_t n,
                                            int64_t page_size, int64_t budget) {
  const int64_t taken = std::max<int64_t>(3, budget / page_size);
  std::vector<int64_t> pages(ranking.begin(),
                             ranking.begin() + std::min<int64_t>(taken, int64_t(ranking.size())));
  std::sort(pages.begin(), pages.end());
  std::vector<int64_t> out;
  for (int64_t page : pages) append_page(out, page, n, page_size, page_size);
  return out;
}

namespace {

struct QuestConfig {
  int64_t page_size = 16;
  // per_kv_head: the group's page scores summed, one selection per KV head; per_query_head:
  // every query head selects and attends on its own pages, as the reference (which repeats KV).
  std::string gqa = "per_kv_head";
  // kernel: floor(B/16) pages, the current one included (the reference kernel; the spec's
  // default); fill: exactly B, the room left after whole pages filled from the next-ranked page
  // (a kvbench option); evaluation: the reference's accuracy-evaluation path, max(3, B/16)
  // pages per query head, the current page a candidate like any other.
  std::string selection = "kernel";

  static const ConfigFields<QuestConfig>& fields() {
    using C = QuestConfig;
    static const auto f =
        ConfigFields<C>()
            .field("page_size", &C::page_size, "entries per page", check::at_least(1))
            .field("gqa", &C::gqa,
                   "per_kv_head: the group's page scores summed, one selection per KV head; "
                   "per_query_head: every query head selects its own pages (the reference)",
                   check::one_of({"per_kv_head", "per_query_head"}))
            .field("selection", &C::selection,
                   "kernel: floor(B/16) pages incl. the current one (the reference kernel); "
                   "fill: exactly B; evaluation: max(3, B/16) pages a selection (the "
                   "reference's accuracy path, per query head there: with gqa per_query_head, "
                   "as preset quest:evaluation)",
                   check::one_of({"kernel", "fill", "evaluation"}));
    return f;
  }
  bool per_query_head() const { return gqa == "per_query_head"; }
  void check_budget(int64_t budget, const std::string& where) const {
    if (selection != "evaluation" && budget < page_size)
      throw InputError(where + ".page_size: budget " + std::to_string(budget) +
                       " must hold at least one page of " + std::to_string(page_size) +
                       " entries (the current page is always attended)");
  }
  // The budget rule per KV head (per query head with per_query_head, the KV head's count their
  // mean). kernel: floor(B/16) - 1 whole pages + the current page's filled entries; fill: B;
  // evaluation: max(3, B/16) pages, whole or one of them the partial current page.
  AttendedRange attended(int64_t budget, int64_t entries, int64_t step) const {
    const int64_t pages = (entries + page_size - 1) / page_size;
    const int64_t current_fill = entries - (pages - 1) * page_size;
    if (selection == "fill") return {double(budget), double(budget)};
    if (selection == "kernel") {
      const double n = double((budget / page_size - 1) * page_size + current_fill);
      return {n, n};
    }
    const int64_t taken = std::min(std::max<int64_t>(3, budget / page_size), pages);
    const int64_t whole = std::min(taken * page_size, entries);
    return {double(std::min(whole, (taken - 1) * page_size + current_fill)), double(whole)};
  }
};

class Quest : public RetrievalMethod {
 public:
  static constexpr int kDenseLayers = 2;  // as the reference
  explicit Quest(const QuestConfig& c) : RetrievalMethod(kDenseLayers), config_(c) {}

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
    const at::TensorOptions summaries = k.options().dtype(summary_dtype(k));
    ix.kmin = at::empty({k.size(0), capacity, k.size(2)}, summaries);
    ix.kmax = at::empty({k.size(0), capacity, k.size(2)}, summaries);
    ix.kmin.narrow(1, 0, ix.pages).copy_(kmin);
    ix.kmax.narrow(1, 0, ix.pages).copy_(kmax);
    account(layer, kv);
  }

  bool holds_step_tensors() const override { return false; }  // k is folded into the summaries

  // k: [Hkv, d]. Widens the last page's summary, or opens a new page. Where select_rows runs
  // next (every head sparse, the kernel or fill selection), the fold is left to its scoring,
  // which reads the key from the pool (one launch a layer on a GPU where two were); else now.
  void on_append(int layer, const at::Tensor& k, const at::Tensor&, LayerKV& kv) override {
    if (layer < dense_layers()) return;
    PageIndex& ix = index_[layer];
    fold_pending(ix, kv);  // a caller that skipped select (none in a session)
    const bool fresh = ix.entries % config_.page_size == 0;
    if (fresh) {
      if (ix.pages == ix.kmin.size(1)) {  // grow ×2
        at::Tensor kmin = at::empty({ix.kmin.size(0), 2 * ix.pages + 1, ix.kmin.size(2)}, ix.kmin.options());
        at::Tensor kmax = at::empty_like(kmin);
        kmin.narrow(1, 0, ix.pages).copy_(ix.kmin.narrow(1, 0, ix.pages));
        kmax.narrow(1, 0, ix.pages).copy_(ix.kmax.narrow(1, 0, ix.pages));
        ix.kmin = kmin;
        ix.kmax = kmax;
      }
      ++ix.pages;
      account(layer, kv);
    }
    ix.key_pending = config_.selection != "evaluation" && kv.size(0) > context_.budget;
    if (!ix.key_pending)
      quest_fold_key(ix.kmin, ix.kmax, k, ix.pages - 1, fresh);  // [Hkv, d] into the last page
    ++ix.entries;
  }

 protected:
  bool per_query_head() const override { return config_.per_query_head(); }

  // q: [Hq, d]. The kernel and fill selections on the device, per KV head (the group's page
  // scores summed) or per query head: the pages quest_select_pages takes (ties ranked by the
  // lower page, as quest_rank_pages), the same count for every unit; one kernel on a GPU
  // (top_page_entries). The evaluation path is ragged (the current page may or may not be
  // among the chosen): select_sparse.
  DeviceRows select_rows(int layer, const at::Tensor& q, const LayerKV& kv) override {
    if (config_.selection == "evaluation") return {};
    const PageIndex& ix = index_[layer];
    const int64_t Hkv = kv.num_heads(), g = q.size(0) / Hkv, d = q.size(1);
    if (kv.size(0) != ix.entries)
      throw std::logic_error("quest: page index out of step with the KV store");
    const int64_t n = ix.entries, page = config_.page_size, B = context_.budget;
    const int64_t current = (n - 1) / page, current_fill = n - current * page;
    const int64_t room = config_.selection == "fill" ? B - current_fill : (B / page - 1) * page;
    const int64_t whole = room / page, part = room % page;  // pages taken whole, then entries
    const std::optional<QuestKeyFold> fold = take_fold(index_[layer], kv);
    at::Tensor scores = quest_page_scores(q.reshape({Hkv, g, d}), ix.kmin.narrow(1, 0, ix.pages),
                                          ix.kmax.narrow(1, 0, ix.pages),
                                          /*sum_group=*/!config_.per_query_head(),
                                          KernelPath::kAuto, fold ? &*fold : nullptr);
    scores = scores.reshape({-1, ix.pages});  // [units, P]: Hkv, or Hq per query head
    return {top_page_entries(scores, current, whole, part, page, n)};
  }

  // q: [Hq, d]. Every head of this family holds the same entries (nothing is evicted).
  std::vector<std::vector<int64_t>> select_sparse(int layer, const at::Tensor& q,
                                                  const LayerKV& kv,
                                                  const std::vector<int>& heads) override {
    fold_pending(index_[layer], kv);
    const PageIndex& ix = index_[layer];
    const int64_t Hkv = kv.num_heads(), g = q.size(0) / Hkv, d = q.size(1);
    for (int h : heads)
      if (kv.size(h) != ix.entries)
        throw std::logic_error("quest: page index out of step with the KV store");
    at::Tensor kmin = ix.kmin.narrow(1, 0, ix.pages), kmax = ix.kmax.narrow(1, 0, ix.pages);
    // [Hkv, g, P], or [Hkv, 1, P] summed over the group (the adapter picks the kernel)
    at::Tensor scores = quest_page_scores(q.reshape({Hkv, g, d}), kmin, kmax,
                                          /*sum_group=*/!config_.per_query_head());
    scores = scores.to(at::kCPU);  // ranked on the host: one copy for all heads
    const bool evaluation = config_.selection == "evaluation";
    std::vector<std::vector<int64_t>> out;  // per head, or per query head (scores' rows)
    for (int h : heads)
      for (int64_t j = 0; j < scores.size(1); ++j) {
        const std::vector<int64_t> ranking =
            quest_rank_pages(scores[h][j], /*with_current=*/evaluation);
        const int64_t n = ix.entries, page = config_.page_size, B = context_.budget;
        const bool fill = config_.selection == "fill";
        out.push_back(evaluation ? quest_evaluation_pages(ranking, n, page, B)
                                 : quest_select_pages(ranking, n, page, B, fill));
      }
    return out;
  }

 private:
  // The summaries' dtype: the keys' on a GPU, where the minimum and maximum of 16-bit keys are
  // 16-bit values (nothing rounds) and the decode step reads half the bytes of fp32; fp32 on
  // the CPU, whose kernel reads fp32.
  static at::ScalarType summary_dtype(const at::Tensor& k) {
    return k.is_cuda() ? k.scalar_type() : at::kFloat;
  }

  struct PageIndex {
    at::Tensor kmin, kmax;  // [Hkv, capacity, d] of summary_dtype; pages 0..pages-1 in use
    int64_t pages = 0;
    int64_t entries = 0;    // entries summarised (== every head's size), the pending one too
    bool key_pending = false;  // the last entry's key is not in the last page's summary yet
  };

  // The pending key's fold as the scoring takes it, now taken: the last entry's pool row per
  // head (a column of the row table, a view) into the last page, a fresh one when the entry
  // opened it.
  std::optional<QuestKeyFold> take_fold(PageIndex& ix, const LayerKV& kv) {
    if (!ix.key_pending) return std::nullopt;
    ix.key_pending = false;
    const int64_t entry = ix.entries - 1;
    return QuestKeyFold{kv.key_pool(), kv.leading_rows(ix.entries).select(1, entry), ix.pages - 1,
                        entry % config_.page_size == 0};
  }

  // The pending fold now, on its own.
  void fold_pending(PageIndex& ix, const LayerKV& kv) {
    if (const std::optional<QuestKeyFold> f = take_fold(ix, kv))
      quest_fold_key(ix.kmin, ix.kmax, f->k_pool.index_select(0, f->rows), f->page, f->fresh);
  }

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
    .fidelity = "pages of page_size = 16 with per-channel min/max keys, score sum_c "
                "max(q_c*kmax_c, q_c*kmin_c), layers 0-1 dense (as the reference); "
                "selection=kernel (default, the reference kernel): floor(B/page_size) pages incl. "
                "the current one, <= B; fill: exactly B, the room after whole pages filled from "
                "the next-ranked page (kvbench's option); evaluation: the reference's "
                "accuracy-evaluation path, max(3, B/page_size) pages per query head, current page "
                "not forced; a head of n <= B entries stays dense, as the spec (the reference "
                "kernel goes sparse once its pages outnumber floor(B/page_size); its evaluation "
                "path always drops a page where n is not a whole number of pages); GQA: group's "
                "scores summed per KV head (gqa: per_query_head: each query head selects and "
                "attends on its own, as the reference)",
    .presets = {{"evaluation",
                 "mit-han-lab/Quest evaluation/quest_attention.py, the accuracy-evaluation path "
                 "behind Quest's accuracy numbers and ClusterKV's Quest baseline "
                 "(sjtu-zhao-lab/ClusterKV accuracy/quest_attention.py, gen = False): max(3, B/16) "
                 "pages per query head, the current page not forced",
                 {{"selection", "evaluation"}, {"gqa", "per_query_head"}}}},
}));

}  // namespace
}  // namespace kvb
