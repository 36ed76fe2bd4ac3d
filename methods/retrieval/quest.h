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

// Quest's page score, an upper bound of q.k over every key of the page:
//   score[h, j, p] = sum_c max(q[h, j, c] * kmax[h, p, c], q[h, j, c] * kmin[h, p, c])
// computed as relu(q) . kmax + min(q, 0) . kmin (two batched matmuls).
// q: [H, g, d]; kmin, kmax: [H, P, d]. Returns [H, g, P], float32.
at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax);

// Which entries one KV head attends to, given page scores. n resident entries form
// P = ceil(n / page_size) pages; the last (current, possibly partial) page is always taken and
// counts against `budget`. The other pages are taken in the order of `rankings` (one ranking per
// query head, best first; with several rankings they are interleaved rank by rank, a page
// counted once) while whole pages fit. With `fill_budget`, the room left (< page_size) is
// filled with the leading entries of the next page in that order, so exactly `budget` entries
// are attended; without it (the reference kernel) floor(budget / page_size) pages are taken in
// all, the current one included. Returns logical indices, ascending. Requires n > budget >=
// page_size.
std::vector<int64_t> quest_select_pages(const std::vector<std::vector<int64_t>>& rankings,
                                        int64_t n, int64_t page_size, int64_t budget,
                                        bool fill_budget);

// Pages 0..P-2 (all but the current one) ranked by descending score, ties by lower index.
// scores: [P] (the current page's entry is ignored).
std::vector<int64_t> quest_rank_pages(const at::Tensor& scores);

}  // namespace kvb
