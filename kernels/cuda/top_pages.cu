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
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/radix_select.cuh"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 1024;  // 32 warps: the scans' warp totals fit one warp
using radix::block_exclusive_sum;
using radix::kItems;

// grid (rows), kThreads threads. row: its scores of pages 0..pages-1; out: its lead +
// whole * page_size + part + (n - pages * page_size) entries.
__global__ void __launch_bounds__(kThreads)
    top_pages_kernel(const float* __restrict__ scores, int64_t stride, int64_t* __restrict__ out,
                     int pages, int whole, int part, int page_size, int64_t n, int64_t lead) {
  __shared__ int warp_totals[32];
  const float* row = scores + int64_t(blockIdx.x) * stride;
  const int room = whole * page_size + part;
  int64_t* const leading = out + int64_t(blockIdx.x) * (lead + room + (n - int64_t(pages) * page_size));
  for (int64_t j = threadIdx.x; j < lead; j += blockDim.x) leading[j] = j;
  int64_t* const o = leading + lead;  // the pages' entries and the trailing ones, shifted by lead
  const int taken = whole + (part > 0 ? 1 : 0);  // pages ranked 0..taken-1 contribute
  if (taken > 0) {
    uint32_t threshold;
    int ties_taken;
    radix::select_threshold<false>(row, nullptr, pages, taken, threshold, ties_taken);
    // Pages in order, kItems consecutive ones a thread: a page above T is taken whole; of the
    // pages at T the first ties_taken, the last of them (ranked taken - 1) trimmed to `part`.
    const int chunk = int(blockDim.x) * kItems;
    int ties_before_chunk = 0, entries_before_chunk = 0;
    for (int first = 0; first < pages; first += chunk) {
      const int mine = first + int(threadIdx.x) * kItems;  // this thread's first page
      uint32_t keys[kItems];
      int ties_in_chunk;
      int tie_rank = ties_before_chunk + radix::keys_and_ties_before<false>(
                                             row, nullptr, pages, mine, threshold, keys,
                                             warp_totals, ties_in_chunk);
      int widths[kItems], width_sum = 0;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        widths[i] = 0;
        if (mine + i >= pages) continue;
        if (keys[i] > threshold) widths[i] = page_size;
        if (keys[i] == threshold) {
          if (tie_rank < ties_taken)
            widths[i] = part > 0 && tie_rank == ties_taken - 1 ? part : page_size;
          ++tie_rank;
        }
        width_sum += widths[i];
      }
      int entries_in_chunk;
      int at = entries_before_chunk + block_exclusive_sum(width_sum, warp_totals, entries_in_chunk);
#pragma unroll
      for (int i = 0; i < kItems; ++i)
        for (int j = 0; j < widths[i]; ++j) o[at++] = lead + int64_t(mine + i) * page_size + j;
      ties_before_chunk += ties_in_chunk;
      entries_before_chunk += entries_in_chunk;
    }
  }
  // The trailing entries (Quest's current page, PQCache's window), after the others: every page
  // lies before them.
  const int64_t trailing_first = int64_t(pages) * page_size;
  for (int64_t j = threadIdx.x; j < n - trailing_first; j += blockDim.x)
    o[room + j] = lead + trailing_first + j;
}

}  // namespace

void top_pages(const float* scores, int64_t stride, int64_t* out, int64_t rows, int64_t pages,
               int64_t whole, int64_t part, int64_t page_size, int64_t n, int64_t lead,
               void* stream) {
  if (rows == 0) return;
  // The block's loops step pages by kThreads * kItems in int.
  if (rows > 0x7fffffff || pages > 0x7fffffff - kThreads * kItems ||
      (whole + 1) * page_size > 0x7fffffff)
    throw std::invalid_argument(
        "kvb::cuda::top_pages: rows over 2^31 - 1, pages over 2^31 - 2^13 or a row of more "
        "than 2^31 - 1 entries");
  top_pages_kernel<<<unsigned(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      scores, stride, out, int(pages), int(whole), int(part), int(page_size), n, lead);
}

}  // namespace kvb::cuda
