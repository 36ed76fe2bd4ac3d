// Quest (Tang et al. 2024, https://arxiv.org/abs/2406.10774): query-aware page selection.
// The parts a test can check on its own: the page summaries and the page score.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvb {

// Per-channel min and max of the keys of each page of `page_size` consecutive entries (the last
// page may be partial). k: [H, n, d]. Returns {kmin, kmax}, each [H, ceil(n / page_size), d],
// float32.
std::pair<at::Tensor, at::Tensor> quest_page_summaries(const at::Tensor& k, int64_t page_size);

// Quest's page score: quest_page_scores in engine/kernel_adapter.h.

// Which entries one KV head (or query head) attends to, given a page ranking (best first).
// n resident entries form P = ceil(n / page_size) pages; the last (current, possibly partial)
// page is always taken and counts against `budget`; the others are taken in ranking order
// (the ranking lists them without the current one). Without `fill_budget` (the reference
// kernel, Quest's default) floor(budget / page_size) pages are taken in all, the current one
// included; with it (a kvbench option) the room left after whole pages (< page_size) is filled
// with the leading entries of the next-ranked page, so exactly `budget` entries are attended.
// Returns logical indices, ascending. Requires n > budget >= page_size.
std::vector<int64_t> quest_select_pages(const std::vector<int64_t>& ranking, int64_t n,
                                        int64_t page_size, int64_t budget, bool fill_budget);

// The accuracy-evaluation path of the reference (evaluation/quest_attention.py): the top
// min(max(3, budget / page_size), P) pages of a ranking over all P pages, the current one a
// candidate like any other (a partial last page with its filled entries). Returns logical
// indices, ascending.
std::vector<int64_t> quest_evaluation_pages(const std::vector<int64_t>& ranking, int64_t n,
                                            int64_t page_size, int64_t budget);

// Pages ranked by descending score, ties by lower index: 0..P-2 (all but the current one), or
// all P with `with_current`. scores: [P].
std::vector<int64_t> quest_rank_pages(const at::Tensor& scores, bool with_current = false);

}  // namespace kvb
