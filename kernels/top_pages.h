// The arguments of a selection of each row's best pages (engine/kernel_adapter.h
// top_page_entries, kernels/cuda/top_pages.cu): one predicate, so the adapter's ATen path and
// the CUDA glue refuse the same calls.
#pragma once
#include <cstdint>

namespace kvb::kernels {

// What top_pages_arguments_ok asks, for the refusals' messages.
inline constexpr const char* kTopPagesContract =
    "whole + (part > 0) <= pages <= P, 0 <= part < page_size, pages * page_size <= n and "
    "lead >= 0";

// Whether `whole` pages of `pages` (the first of a row's P scores) taken whole, the next-ranked
// one's first `part` entries and the trailing entries pages * page_size .. n - 1 (Quest's
// current page, PQCache's local window; none when n is pages * page_size), all shifted by
// `lead` leading entries 0 .. lead - 1 (PQCache's sinks), make a selection.
inline bool top_pages_arguments_ok(int64_t P, int64_t pages, int64_t whole, int64_t part,
                                   int64_t page_size, int64_t n, int64_t lead) {
  return page_size >= 1 && pages >= 0 && pages <= P && whole >= 0 && part >= 0 &&
         part < page_size && whole + (part > 0 ? 1 : 0) <= pages && n >= pages * page_size &&
         lead >= 0;
}

}  // namespace kvb::kernels
