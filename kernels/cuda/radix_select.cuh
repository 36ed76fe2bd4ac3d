// A block's radix select over float scores (kernels/cuda/top_pages.cu: Quest's pages and
// PQCache's top-k; kernels/cuda/cluster_rows.cu: ClusterKV's clusters, weighted by their
// sizes): which items a stable descending sort would rank first, without sorting.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kvb::cuda::radix {

constexpr int kDigits = 256;  // 8 bits a radix pass, 4 passes
constexpr int kItems = 8;     // scores a thread reads per iteration of each pass

// A float's key: larger float, larger unsigned key; -0 and +0 one key (they compare equal,
// so a stable sort keeps them in index order); every NaN the largest key (ATen's sort ranks
// NaN above everything, NaNs equal).
__device__ inline uint32_t order_key(float f) {
  if (f != f) return 0xffffffffu;
  const uint32_t u = __float_as_uint(f == 0.f ? 0.f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of one value per thread over the block (every thread must call it; at
// most 1024 threads, so the warp totals fit one warp); `total` gets the block's sum.
// warp_totals: shared scratch of 32 ints.
__device__ inline int block_exclusive_sum(int value, int* warp_totals, int& total) {
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

// Warp 0's part of a radix pass: from the pass's histogram (the weight of each digit among the
// items sharing `prefix`), the digit at which the weight summed from the top reaches
// `remaining`; it writes the prefix with that digit at `shift` and the weight left for it to
// chosen_prefix / chosen_remaining, or leaves them (no digit reaches it: weights summing below
// `taken`). Lane l takes digits 255 - 8l .. 248 - 8l, the top ones first.
__device__ __noinline__ inline void choose_digit(const int* histogram, uint32_t prefix, int remaining,
                                    int shift, uint32_t* chosen_prefix, int* chosen_remaining) {
  constexpr int kPerLane = kDigits / 32;
  const int lane = threadIdx.x % 32;
  int mine = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) mine += histogram[kDigits - 1 - (lane * kPerLane + i)];
  int inclusive = mine;  // the lanes' sums from the top digit down, inclusive
  for (int offset = 1; offset < 32; offset *= 2) {
    const int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  int above = inclusive - mine;  // weight of the digits above this lane's
  if (above < remaining && remaining <= inclusive) {  // one lane at most
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int digit = kDigits - 1 - (lane * kPerLane + i);
      const int weight = histogram[digit];
      if (above < remaining && remaining <= above + weight) {
        *chosen_prefix = prefix | (uint32_t(digit) << shift);
        *chosen_remaining = remaining - above;
      }
      above += weight;
    }
  }
}

// Items 0..count-1 of `row`, item i weighing weights[i] (kWeighted; else 1 each). Finds the key
// T at which the items' weights, summed in the order of a stable descending sort of their
// scores, reach `taken`: the items above T weigh less than `taken`, those at or above T at
// least that. ties_taken: how much of `taken` is left for the items at T (taken in index
// order, as a stable sort ranks ties). Radix select, most significant digit first: prefix
// holds T's digits found so far, remaining the weight still to be taken among the items
// sharing them. Needs 1 <= taken <= the items' total weight (weights >= 0) and a block of a
// multiple of 32 threads.
// Two barriers a pass: the passes count into two histograms in turn, so that a pass zeroes
// the next one's while it counts into its own (the next one's was last read before the
// previous pass's second barrier), and warp 0 alone picks the digit. (Until 2026-11-27: one
// histogram, zeroed, counted and scanned by the whole block, 7 barriers a pass, 28 a select;
// Quest's whole selection took 22-24 us a layer on the H100 whether it ranked 2048 or 8192
// pages.)
template <bool kWeighted>
__device__ void select_threshold(const float* row, const int32_t* weights, int count, int taken,
                                 uint32_t& threshold, int& ties_taken) {
  __shared__ int histograms[2][kDigits];
  __shared__ uint32_t chosen_prefix;
  __shared__ int chosen_remaining;
  for (int i = threadIdx.x; i < kDigits; i += blockDim.x) histograms[0][i] = 0;
  if (threadIdx.x == 0) chosen_prefix = 0, chosen_remaining = taken;
  __syncthreads();
  uint32_t prefix = 0, mask = 0;
  int remaining = taken;
  for (int pass = 0, shift = 24; shift >= 0; ++pass, shift -= 8) {
    int* const histogram = histograms[pass % 2];
    for (int i = threadIdx.x; i < kDigits; i += blockDim.x) histograms[(pass + 1) % 2][i] = 0;
    // kItems scores a thread an iteration, all loaded before any is counted: one load a
    // thread an iteration left each pass waiting on a memory latency per 1024 scores (the
    // 128k top-k took 237 us on the H100 so). Every lane of a warp runs each iteration (the
    // bound is the block's), so the lanes of one digit can add together: the leading digits
    // of real scores fall in a few bins, and one shared-memory atomic per item would queue.
    for (int first = 0; first < count; first += int(blockDim.x) * kItems) {
      float values[kItems];
      int w[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {  // item first + i * blockDim + t: coalesced loads
        const int p = first + i * int(blockDim.x) + int(threadIdx.x);
        values[i] = p < count ? row[p] : 0.f;
        w[i] = kWeighted ? (p < count ? weights[p] : 0) : 1;
      }
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int p = first + i * int(blockDim.x) + int(threadIdx.x);
        const uint32_t key = order_key(values[i]);
        const int digit = p < count && (key & mask) == prefix ? int((key >> shift) & 0xffu) : -1;
        if (kWeighted) {  // lanes of one digit weigh differently: an atomic each
          if (digit >= 0 && w[i] != 0) atomicAdd(&histogram[digit], w[i]);
        } else {
          const unsigned same = __match_any_sync(0xffffffffu, digit);
          if (digit >= 0 && threadIdx.x % 32 == __ffs(same) - 1)
            atomicAdd(&histogram[digit], __popc(same));
        }
      }
    }
    __syncthreads();  // the histogram complete
    if (threadIdx.x < 32)
      choose_digit(histogram, prefix, remaining, shift, &chosen_prefix, &chosen_remaining);
    __syncthreads();  // chosen_* written; the histogram read
    prefix = chosen_prefix;
    remaining = chosen_remaining;
    mask |= 0xffu << shift;
  }
  threshold = prefix;
  ties_taken = remaining;
}

// The walk after select_threshold, in chunks of blockDim * kItems items, kItems consecutive
// ones a thread from `mine`: their keys (key_of(i): item i's), and the weight of the chunk's
// items at `threshold` before this thread's (an exclusive sum over the block; every thread must
// call it). chunk_weight gets the chunk's whole weight at the threshold.
template <bool kWeighted, typename KeyOf>
__device__ int keys_of_and_ties_before(KeyOf key_of, const int32_t* weights, int count, int mine,
                                       uint32_t threshold, uint32_t (&keys)[kItems],
                                       int* warp_totals, int& chunk_weight) {
  int weight = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    keys[i] = mine + i < count ? key_of(mine + i) : 0u;
    if (mine + i < count && keys[i] == threshold) weight += kWeighted ? weights[mine + i] : 1;
  }
  return block_exclusive_sum(weight, warp_totals, chunk_weight);
}

// The same for scores read from `row`.
template <bool kWeighted>
__device__ int keys_and_ties_before(const float* row, const int32_t* weights, int count, int mine,
                                    uint32_t threshold, uint32_t (&keys)[kItems],
                                    int* warp_totals, int& chunk_weight) {
  return keys_of_and_ties_before<kWeighted>([row](int i) { return order_key(row[i]); }, weights,
                                            count, mine, threshold, keys, warp_totals,
                                            chunk_weight);
}

// How much of each of a thread's kItems items, from `mine` on, is taken (0 past `count`): an
// item above T all its page_size entries; of the items at T, in order, the first ties_taken
// (tie_rank: the block's items at T before this thread's, advanced past its own), the last of
// them (ranked taken - 1) cut to its first `part` entries when part > 0. Returns the sum.
__device__ inline int taken_widths(const uint32_t (&keys)[kItems], int mine, int count,
                                   uint32_t threshold, int ties_taken, int page_size, int part,
                                   int& tie_rank, int (&widths)[kItems]) {
  int sum = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    widths[i] = 0;
    if (mine + i >= count) continue;
    if (keys[i] > threshold) widths[i] = page_size;
    if (keys[i] == threshold) {
      if (tie_rank < ties_taken)
        widths[i] = part > 0 && tie_rank == ties_taken - 1 ? part : page_size;
      ++tie_rank;
    }
    sum += widths[i];
  }
  return sum;
}

// After select_threshold: each of the items begin..end-1 (each of weight 1: PQCache's tokens
// after a select over their combinations weighted by token counts, or the unweighted items
// themselves) taken, those above `threshold` and the first ties_taken at it in order, passed to
// keep(i, at) with `at` its place among the taken (in item order). ties_before / kept_before:
// the items at the threshold, and those taken, before `begin` (a slice's offsets; 0 for a
// whole row). key_of(i): item i's key. Items in chunks of blockDim * kItems, kItems consecutive
// ones a thread; every thread must call it. warp_totals: shared scratch of 32 ints.
template <typename KeyOf, typename Keep>
__device__ void for_each_taken(KeyOf key_of, int begin, int end, uint32_t threshold,
                               int ties_taken, int ties_before, int kept_before,
                               int* warp_totals, Keep keep) {
  for (int first = begin; first < end; first += int(blockDim.x) * kItems) {
    const int mine = first + int(threadIdx.x) * kItems;
    uint32_t keys[kItems];
    int ties_in_chunk;
    int tie_rank = ties_before + keys_of_and_ties_before<false>(key_of, nullptr, end, mine,
                                                                threshold, keys, warp_totals,
                                                                ties_in_chunk);
    int kept[kItems];  // 1 or 0: items of one entry, none cut
    const int kept_here =
        taken_widths(keys, mine, end, threshold, ties_taken, 1, 0, tie_rank, kept);
    int kept_in_chunk;
    int at = kept_before + block_exclusive_sum(kept_here, warp_totals, kept_in_chunk);
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (kept[i]) keep(mine + i, at++);
    ties_before += ties_in_chunk;
    kept_before += kept_in_chunk;
  }
}

}  // namespace kvb::cuda::radix
