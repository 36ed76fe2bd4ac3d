// The entries of each row's best-ranked pages, ascending, in one launch (kvbench_cuda.h
// top_pages has the contract; the ATen path of engine/kernel_adapter.cpp top_page_entries is
// the reference it must equal). Quest's selection: it replaces a stable sort of every page's
// score, the entries' assembly and a second sort of them, about ten launches a layer, and at
// 128k (8192 pages, beyond ATen's one-kernel sort of 4096) a segmented radix sort of 115 us
// (H100, 2026-11-26; `gpu_quest_select/8192/1` times all those operators). With pages of one
// entry it is a top-k in index order (PQCache's), where ATen's top-k of 32k scores launched 13
// kernels and a sort followed.
//
// A block per row. The pages a stable descending sort would rank first are found without
// sorting: a radix select over the scores' order-preserving 32-bit keys gives the key T of the
// last page taken; every page above T is taken, and of the pages at T the lowest-numbered
// ones, as many as remain (a stable sort ranks ties by page). Then the taken pages write their
// entries in page order, each at the prefix sum of the widths before it, so the output is
// ascending without a sort. PQCache's sinks before its candidates and its window after them
// come from the same launch (`lead`, the trailing entries).
//
// Long rows in two launches (`chunk`): a block per row alone ranks 131 072 PQ scores five times
// over on 8 of the GPU's SMs. First a block per chunk of a row keeps the chunk's best pages
// (a row's best `taken` pages are each among the best `taken` of their chunk), in page order;
// then the block per row ranks those candidates, mapping each back to its page.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/radix_select.cuh"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 1024;      // 32 warps: the scans' warp totals fit one warp
constexpr int kChunkThreads = 512;  // the first launch's blocks: 4096 scores, one pass each
using radix::block_exclusive_sum;
using radix::kItems;
using radix::taken_widths;

// grid (rows), kThreads threads. row: the scores of the items 0..items-1 it ranks; item i is
// page page_of[i] (candidates), or page i (page_of null). out: its lead + whole * page_size +
// part + (n - trailing_first) entries. With `limit` (page_size 1, part 0): the row takes
// min(whole, *limit - trailing) pages, and repeats its last entry up to the width.
__global__ void __launch_bounds__(kThreads)
    top_pages_kernel(const float* __restrict__ scores, int64_t stride,
                     const int32_t* __restrict__ page_of, int64_t* __restrict__ out, int items,
                     int whole, int part, int page_size, int64_t trailing_first, int64_t n,
                     int64_t lead, const int64_t* __restrict__ limit) {
  __shared__ int warp_totals[32];
  const float* row = scores + int64_t(blockIdx.x) * stride;
  const int32_t* pages_of_row = page_of ? page_of + int64_t(blockIdx.x) * stride : nullptr;
  const int width = whole * page_size + part + int(n - trailing_first);  // after the lead
  int64_t* const leading = out + int64_t(blockIdx.x) * (lead + width);
  for (int64_t j = threadIdx.x; j < lead; j += blockDim.x) leading[j] = j;
  int64_t* const o = leading + lead;  // the pages' entries and the trailing ones, shifted by lead
  if (limit) whole = int(max(int64_t(0), min(int64_t(whole), *limit - (n - trailing_first))));
  const int room = whole * page_size + part;
  const int taken = whole + (part > 0 ? 1 : 0);  // items ranked 0..taken-1 contribute
  if (taken > 0) {
    uint32_t threshold;
    int ties_taken;
    radix::select_threshold<false>(row, nullptr, items, taken, threshold, ties_taken);
    // Items in order, kItems consecutive ones a thread (taken_widths has the rule).
    const int chunk = int(blockDim.x) * kItems;
    int ties_before_chunk = 0, entries_before_chunk = 0;
    for (int first = 0; first < items; first += chunk) {
      const int mine = first + int(threadIdx.x) * kItems;  // this thread's first item
      uint32_t keys[kItems];
      int ties_in_chunk;
      int tie_rank = ties_before_chunk + radix::keys_and_ties_before<false>(
                                             row, nullptr, items, mine, threshold, keys,
                                             warp_totals, ties_in_chunk);
      int widths[kItems];
      const int width_sum = taken_widths(keys, mine, items, threshold, ties_taken, page_size,
                                         part, tie_rank, widths);
      int entries_in_chunk;
      int at = entries_before_chunk + block_exclusive_sum(width_sum, warp_totals, entries_in_chunk);
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (widths[i] == 0) continue;
        const int64_t page = pages_of_row ? pages_of_row[mine + i] : mine + i;
        for (int j = 0; j < widths[i]; ++j) o[at++] = lead + page * page_size + j;
      }
      ties_before_chunk += ties_in_chunk;
      entries_before_chunk += entries_in_chunk;
    }
  }
  // The trailing entries (Quest's current page, PQCache's window), after the others: every page
  // lies before them.
  for (int64_t j = threadIdx.x; j < n - trailing_first; j += blockDim.x)
    o[room + j] = lead + trailing_first + j;
  for (int64_t j = room + (n - trailing_first) + threadIdx.x; j < width; j += blockDim.x)
    o[j] = lead + n - 1;  // under a limit: the last trailing entry, repeated
}

// grid (chunks, rows), kChunkThreads threads: chunk c of a row, pages c * chunk .. on, keeps
// its best min(taken, its pages) pages, in page order, at candidates c * min(taken, chunk) ..
// of the row (rows `candidates` apart): their scores, bit for bit, and their page numbers.
__global__ void __launch_bounds__(kChunkThreads)
    chunk_candidates_kernel(const float* __restrict__ scores, int64_t stride, int pages,
                            int chunk, int taken, float* __restrict__ candidate_scores,
                            int32_t* __restrict__ candidate_pages, int64_t candidates) {
  __shared__ int warp_totals[32];
  const int first_page = int(blockIdx.x) * chunk;
  const int count = min(chunk, pages - first_page);
  const int keep = min(taken, count);
  const float* row = scores + int64_t(blockIdx.y) * stride + first_page;
  const int64_t at_row =
      int64_t(blockIdx.y) * candidates + int64_t(blockIdx.x) * min(taken, chunk);
  uint32_t threshold;
  int ties_taken;
  radix::select_threshold<false>(row, nullptr, count, keep, threshold, ties_taken);
  radix::for_each_taken([row](int i) { return radix::order_key(row[i]); }, 0, count, threshold,
                        ties_taken, 0, 0, warp_totals, [&](int i, int at) {
                          candidate_scores[at_row + at] = row[i];
                          candidate_pages[at_row + at] = first_page + i;
                        });
}

}  // namespace

void top_pages(const float* scores, int64_t stride, int64_t* out, int64_t rows, int64_t pages,
               int64_t whole, int64_t part, int64_t page_size, int64_t n, int64_t lead,
               int64_t chunk, float* candidate_scores, int32_t* candidate_pages, void* stream,
               const int64_t* limit) {
  if (rows == 0) return;
  // The block's loops step pages by kThreads * kItems in int.
  if (rows > 0x7fffffff || pages > 0x7fffffff - kThreads * kItems ||
      (whole + 1) * page_size + (n - pages * page_size) > 0x7fffffff)
    throw std::invalid_argument(
        "kvb::cuda::top_pages: rows over 2^31 - 1, pages over 2^31 - 2^13 or a row of more "
        "than 2^31 - 1 entries");
  if (limit && (page_size != 1 || part != 0 || n == pages))
    throw std::invalid_argument(
        "kvb::cuda::top_pages: a limit needs pages of one entry, no part and trailing entries");
  const int64_t taken = whole + (part > 0 ? 1 : 0);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (chunk <= 0 || taken == 0) {
    top_pages_kernel<<<unsigned(rows), kThreads, 0, s>>>(
        scores, stride, nullptr, out, int(pages), int(whole), int(part), int(page_size),
        pages * page_size, n, lead, limit);
    return;
  }
  if (!candidate_scores || !candidate_pages || rows > 65535)
    throw std::invalid_argument(
        "kvb::cuda::top_pages: chunks need the candidates' buffers and at most 65535 rows");
  const int64_t candidates = top_pages_candidates(pages, taken, chunk);
  const int64_t chunks = (pages - 1) / chunk + 1;  // pages >= taken >= 1; no overflow at any chunk
  chunk_candidates_kernel<<<dim3(unsigned(chunks), unsigned(rows)), kChunkThreads, 0, s>>>(
      scores, stride, int(pages), int(std::min<int64_t>(chunk, pages)), int(taken),
      candidate_scores, candidate_pages, candidates);
  top_pages_kernel<<<unsigned(rows), kThreads, 0, s>>>(
      candidate_scores, candidates, candidate_pages, out, int(candidates), int(whole),
      int(part), int(page_size), pages * page_size, n, lead, limit);
}

}  // namespace kvb::cuda
