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
// ascending without a sort.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/kvbench_cuda.h"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 1024;  // 32 warps: the scans' warp totals fit one warp
constexpr int kDigits = 256;    // 8 bits a radix pass, 4 passes
constexpr int kItems = 8;       // pages a thread reads per iteration of each pass

// A float's key: larger float, larger unsigned key; -0 and +0 one key (they compare equal,
// so a stable sort keeps them in page order); every NaN the largest key (ATen's sort ranks
// NaN above everything, NaNs equal).
__device__ uint32_t order_key(float f) {
  if (f != f) return 0xffffffffu;
  const uint32_t u = __float_as_uint(f == 0.f ? 0.f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of one value per thread over the block (every thread must call it);
// `total` gets the block's sum. warp_totals: shared scratch of 32 ints.
__device__ int block_exclusive_sum(int value, int* warp_totals, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int sum = lane < warps ? warp_totals[lane] : 0;
    for (int offset = 1; offset < 32; offset *= 2) {
      const int below = __shfl_up_sync(0xffffffffu, sum, offset);
      if (lane >= offset) sum += below;
    }
    warp_totals[lane] = sum;  // inclusive over warps
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_totals[warp - 1] : 0) + inclusive - value;
  total = warp_totals[warps - 1];
  __syncthreads();  // warp_totals is reused by the next call
  return before;
}

// The key T of the page ranked taken - 1, and how many of the pages at T are taken (the
// pages above T are taken - that many). Radix select, most significant digit first: prefix
// holds T's digits found so far, remaining how many of the pages sharing them are to be taken.
// Needs 1 <= taken <= pages.
__device__ void select_threshold(const float* row, int pages, int taken, uint32_t& threshold,
                                 int& ties_taken) {
  __shared__ int histogram[kDigits];
  __shared__ int warp_totals[32];
  __shared__ uint32_t chosen_prefix;
  __shared__ int chosen_remaining;
  uint32_t prefix = 0, mask = 0;
  int remaining = taken;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < kDigits; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    // kItems pages a thread an iteration, all loaded before any is counted: one load a
    // thread an iteration left each pass waiting on a memory latency per 1024 pages (the
    // 128k top-k took 237 us on the H100 so). Every lane of a warp runs each iteration (the
    // bound is the block's), so the lanes of one digit can add together: the leading digits
    // of real scores fall in a few bins, and one shared-memory atomic per page would queue.
    for (int first = 0; first < pages; first += int(blockDim.x) * kItems) {
      float values[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {  // page first + i * blockDim + t: coalesced loads
        const int p = first + i * int(blockDim.x) + int(threadIdx.x);
        values[i] = p < pages ? row[p] : 0.f;
      }
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int p = first + i * int(blockDim.x) + int(threadIdx.x);
        const uint32_t key = order_key(values[i]);
        const int digit = p < pages && (key & mask) == prefix ? int((key >> shift) & 0xffu) : -1;
        const unsigned same = __match_any_sync(0xffffffffu, digit);
        if (digit >= 0 && threadIdx.x % 32 == __ffs(same) - 1)
          atomicAdd(&histogram[digit], __popc(same));
      }
    }
    __syncthreads();
    // Thread t counts digit 255 - t: the pages at or above a digit are a prefix sum.
    const int count = threadIdx.x < kDigits ? histogram[kDigits - 1 - threadIdx.x] : 0;
    int total;
    const int above = block_exclusive_sum(count, warp_totals, total);
    if (threadIdx.x < kDigits && above < remaining && remaining <= above + count) {
      chosen_prefix = prefix | (uint32_t(kDigits - 1 - threadIdx.x) << shift);
      chosen_remaining = remaining - above;
    }
    __syncthreads();
    prefix = chosen_prefix;
    remaining = chosen_remaining;
    mask |= 0xffu << shift;
    __syncthreads();  // chosen_* and histogram are written again by the next pass
  }
  threshold = prefix;
  ties_taken = remaining;
}

// grid (rows), kThreads threads. row: its scores of pages 0..pages-1; out: its
// whole * page_size + part + (n - pages * page_size) entries.
__global__ void __launch_bounds__(kThreads)
    top_pages_kernel(const float* __restrict__ scores, int64_t stride, int64_t* __restrict__ out,
                     int pages, int whole, int part, int page_size, int64_t n) {
  __shared__ int warp_totals[32];
  const float* row = scores + int64_t(blockIdx.x) * stride;
  const int room = whole * page_size + part;
  int64_t* o = out + int64_t(blockIdx.x) * (room + (n - int64_t(pages) * page_size));
  const int taken = whole + (part > 0 ? 1 : 0);  // pages ranked 0..taken-1 contribute
  if (taken > 0) {
    uint32_t threshold;
    int ties_taken;
    select_threshold(row, pages, taken, threshold, ties_taken);
    // Pages in order, kItems consecutive ones a thread: a page above T is taken whole; of the
    // pages at T the first ties_taken, the last of them (ranked taken - 1) trimmed to `part`.
    const int chunk = int(blockDim.x) * kItems;
    int ties_before_chunk = 0, entries_before_chunk = 0;
    for (int first = 0; first < pages; first += chunk) {
      const int mine = first + int(threadIdx.x) * kItems;  // this thread's first page
      uint32_t keys[kItems];
      int ties = 0;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        keys[i] = mine + i < pages ? order_key(row[mine + i]) : 0u;
        ties += mine + i < pages && keys[i] == threshold;
      }
      int ties_in_chunk;
      int tie_rank = ties_before_chunk + block_exclusive_sum(ties, warp_totals, ties_in_chunk);
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
        for (int j = 0; j < widths[i]; ++j) o[at++] = int64_t(mine + i) * page_size + j;
      ties_before_chunk += ties_in_chunk;
      entries_before_chunk += entries_in_chunk;
    }
  }
  // The trailing entries (Quest's current page), after the others: every page lies before them.
  const int64_t trailing_first = int64_t(pages) * page_size;
  for (int64_t j = threadIdx.x; j < n - trailing_first; j += blockDim.x)
    o[room + j] = trailing_first + j;
}

}  // namespace

void top_pages(const float* scores, int64_t stride, int64_t* out, int64_t rows, int64_t pages,
               int64_t whole, int64_t part, int64_t page_size, int64_t n, void* stream) {
  if (rows == 0) return;
  // The block's loops step pages by kThreads * kItems in int.
  if (rows > 0x7fffffff || pages > 0x7fffffff - kThreads * kItems ||
      (whole + 1) * page_size > 0x7fffffff)
    throw std::invalid_argument(
        "kvb::cuda::top_pages: rows over 2^31 - 1, pages over 2^31 - 2^13 or a row of more "
        "than 2^31 - 1 entries");
  top_pages_kernel<<<unsigned(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      scores, stride, out, int(pages), int(whole), int(part), int(page_size), n);
}

}  // namespace kvb::cuda
