// ClusterKV's rows of a decode step in one launch (kvbench_cuda.h cluster_rows has the
// contract; the ATen path of engine/kernel_adapter.cpp cluster_rows is the reference it must
// equal). It replaces a stable sort of the cluster scores, the members' gather in rank order,
// the cache accounting's gather, compare, sum and scatter, the sinks' and recent entries'
// ranges, their concatenation and its sort: about a dozen launches a layer, where the H100's
// profile showed ClusterKV's selection bound by the host's launches (690 a step at 32k).
//
// A block per KV head:
// 1. A radix select over the cluster scores, each cluster weighing its size
//    (radix_select.cuh), gives the key T where a stable descending sort's running sum of sizes
//    reaches `taken`: every cluster above T is taken whole, those at T in id order until
//    `taken`, the last of them cut short (its first members, as the ranked concatenation
//    cuts it).
// 2. The taken members set their bits in a bitmap of the head's n entries (shared memory), all
//    of them at once, a thread per member (step 2 below says why); the cache's step table is
//    read and written for them.
// 3. The sinks' and the recent entries' bits, then the set bits in order: the row, ascending.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/radix_select.cuh"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 1024;  // 32 warps: block_exclusive_sum's warp totals fit one warp
// radix::select_threshold's and this kernel's own static shared memory, at most (2192 bytes by
// ptxas, sm_90, since select_threshold's two histograms)
constexpr int kStaticShared = 4096;

using radix::block_exclusive_sum;
using radix::kItems;

// Dynamic shared memory: each cluster's taken member count [C] (then the taken members before
// it), then the entries' bitmap.
int64_t dynamic_shared(int64_t clusters, int64_t n) {
  return (clusters + (n + 31) / 32) * int64_t(sizeof(uint32_t));
}

// Step 1's second half: use[c] = how many of cluster c's first members are taken.
__device__ void taken_per_cluster(const float* row, const int32_t* sizes, int C, uint32_t threshold,
                                  int ties_taken, int32_t* use, int* warp_totals) {
  const int chunk = int(blockDim.x) * kItems;
  int tie_weight_before_chunk = 0;
  for (int first = 0; first < C; first += chunk) {
    const int mine = first + int(threadIdx.x) * kItems;  // this thread's first cluster
    uint32_t keys[kItems];
    int tie_weight_in_chunk;
    int before = tie_weight_before_chunk +
                 radix::keys_and_ties_before<true>(row, sizes, C, mine, threshold, keys,
                                                   warp_totals, tie_weight_in_chunk);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (mine + i >= C) continue;
      const int size = sizes[mine + i];
      if (keys[i] > threshold) use[mine + i] = size;
      if (keys[i] == threshold) {  // ties in id order, as a stable sort ranks them
        use[mine + i] = min(max(ties_taken - before, 0), size);
        before += size;
      }
    }
    tie_weight_before_chunk += tie_weight_in_chunk;
  }
}

// grid (H), kThreads threads, dynamic_shared(C, n) bytes. Rows of [H, *] inputs are
// contiguous: scores, sizes, starts C apart, members N apart, last_selected W apart, out
// `width` apart.
__global__ void __launch_bounds__(kThreads)
    cluster_rows_kernel(const float* __restrict__ scores, const int32_t* __restrict__ sizes,
                        const int32_t* __restrict__ starts, const int32_t* __restrict__ members,
                        int C, int N, int taken, int sinks, int64_t recent_begin, int64_t n,
                        int64_t* __restrict__ last_selected, int64_t W, int64_t step,
                        int64_t oldest_hit, unsigned long long* __restrict__ hits,
                        int64_t* __restrict__ out, int64_t width) {
  extern __shared__ uint32_t dynamic[];
  int32_t* const use = reinterpret_cast<int32_t*>(dynamic);  // [C]: counts, then before[]
  uint32_t* const bitmap = dynamic + C;                      // [words]: entry e is bit e % 32 of word e / 32
  __shared__ int warp_totals[32];
  __shared__ unsigned long long block_hits;
  const int64_t h = blockIdx.x;
  const int words = int((n + 31) / 32);
  const float* row = scores + h * C;
  const int32_t* head_sizes = sizes + h * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) use[c] = 0;
  for (int w = threadIdx.x; w < words; w += blockDim.x) bitmap[w] = 0;
  if (threadIdx.x == 0) block_hits = 0;
  __syncthreads();
  if (taken > 0) {
    uint32_t threshold;
    int ties_taken;
    radix::select_threshold<true>(row, head_sizes, C, taken, threshold, ties_taken);
    taken_per_cluster(row, head_sizes, C, threshold, ties_taken, use, warp_totals);
  }
  __syncthreads();

  // 2. Slot s of the head's taken members (clusters in id order, each its first use[c]) is
  // member s - before[c] of the cluster c holding it: use[] becomes the exclusive prefix sums
  // before[], and each thread finds its slots' clusters by a binary search of them. Every
  // member's reads (its id, then its cache step) are then in flight at once; a warp per
  // cluster, in turn, made them one cluster after another, about 13 clusters of dependent
  // reads a warp at 32k (42.7 us a launch on the H100, 2026-11-27).
  const int lane = threadIdx.x % 32;
  const int32_t* head_starts = starts + h * C;
  const int32_t* head_members = members + h * N;
  int64_t* head_last = last_selected ? last_selected + h * W : nullptr;
  int total_taken = 0;
  for (int first = 0; first < C; first += int(blockDim.x) * kItems) {
    const int mine = first + int(threadIdx.x) * kItems;
    int counts[kItems], sum = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      counts[i] = mine + i < C ? use[mine + i] : 0;
      sum += counts[i];
    }
    int in_chunk;
    int before = total_taken + block_exclusive_sum(sum, warp_totals, in_chunk);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (mine + i < C) use[mine + i] = before;
      before += counts[i];
    }
    total_taken += in_chunk;
  }
  __syncthreads();  // every before[] written
  unsigned long long my_hits = 0;
  for (int slot = threadIdx.x; slot < total_taken; slot += blockDim.x) {
    int lo = 0, hi = C;  // the last cluster whose before[] <= slot: before[0] = 0 <= slot
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (use[mid] <= slot) lo = mid; else hi = mid;
    }
    const int32_t e = head_members[head_starts[lo] + (slot - use[lo])];
    if (e < 0 || e >= n) continue;  // outside the contract: never past the bitmap
    atomicOr(&bitmap[e / 32], 1u << (e % 32));
    if (head_last) {  // a hit: selected within the last R steps
      my_hits += head_last[e] >= oldest_hit ? 1 : 0;
      head_last[e] = step;
    }
  }
  // 3. The sinks and the recent entries.
  for (int64_t e = threadIdx.x; e < sinks; e += blockDim.x) atomicOr(&bitmap[e / 32], 1u << (e % 32));
  for (int64_t e = recent_begin + threadIdx.x; e < n; e += blockDim.x)
    atomicOr(&bitmap[e / 32], 1u << (e % 32));
  if (hits) {
    for (int offset = 16; offset > 0; offset /= 2)
      my_hits += __shfl_xor_sync(0xffffffffu, my_hits, offset);
    if (lane == 0 && my_hits) atomicAdd(&block_hits, my_hits);
  }
  __syncthreads();
  if (hits && threadIdx.x == 0 && block_hits) atomicAdd(hits, block_hits);

  // The set bits in order, kItems consecutive words a thread: each writes at the prefix sum of
  // the bits before its words.
  int64_t* const o = out + h * width;
  int64_t written_before_chunk = 0;
  for (int first = 0; first < words; first += int(blockDim.x) * kItems) {
    const int mine = first + int(threadIdx.x) * kItems;
    int bits = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) bits += mine + i < words ? __popc(bitmap[mine + i]) : 0;
    int bits_in_chunk;
    int64_t at = written_before_chunk + block_exclusive_sum(bits, warp_totals, bits_in_chunk);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (mine + i >= words) continue;
      for (uint32_t word = bitmap[mine + i]; word; word &= word - 1) {
        if (at < width) o[at] = int64_t(mine + i) * 32 + (__ffs(word) - 1);  // width: a bound
        ++at;
      }
    }
    written_before_chunk += bits_in_chunk;
  }
}

// The current device's opt-in limit of dynamic shared memory per block, for this kernel, asked
// of the driver once per device: a decode step checks it at every layer (the adapter's
// predicate, the glue's and the launch's).
int64_t dynamic_shared_limit() {
  constexpr int kDevices = 64;
  static std::atomic<int64_t> known[kDevices] = {};  // 0: not asked yet
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 48 * 1024 - kStaticShared;
  }
  if (device < kDevices && known[device].load() > 0) return known[device].load();
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
      cudaSuccess) {
    cudaGetLastError();
    return 48 * 1024 - kStaticShared;
  }
  const int64_t limit = int64_t(optin) - kStaticShared;
  if (device < kDevices) known[device].store(limit);
  return limit;
}

}  // namespace

bool cluster_rows_fit(int64_t clusters, int64_t n) {
  return clusters >= 0 && clusters < 0x7fffffff && n >= 0 && n < (int64_t(1) << 40) &&
         dynamic_shared(clusters, n) <= dynamic_shared_limit();
}

void cluster_rows(const float* scores, const int32_t* sizes, const int32_t* starts,
                  const int32_t* members, int64_t H, int64_t C, int64_t N, int64_t taken,
                  int64_t sinks, int64_t recent_begin, int64_t n, int64_t* last_selected,
                  int64_t W, int64_t step, int64_t oldest_hit, int64_t* hits, int64_t* out,
                  void* stream) {
  if (H == 0) return;
  if (!cluster_rows_fit(C, n) || C > 0x7fffffff - kThreads * kItems || N > 0x7fffffff ||
      taken < 0 || taken > N || sinks < 0 || sinks > 0x7fffffff || sinks > recent_begin ||
      recent_begin > n)
    throw std::invalid_argument(
        "kvb::cuda::cluster_rows: clusters and entries beyond shared memory (cluster_rows_fit), "
        "or not 0 <= taken <= N and 0 <= sinks <= recent_begin <= n");
  const int64_t shared = dynamic_shared(C, n);
  // Beyond the default 48 KiB a kernel must be allowed more, on each device that runs it.
  if (shared > 48 * 1024 - kStaticShared &&
      cudaFuncSetAttribute(cluster_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(shared)) != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("kvb::cuda::cluster_rows: " + std::to_string(shared) +
                             " bytes of shared memory refused by the device");
  }
  const int64_t width = sinks + taken + (n - recent_begin);
  cluster_rows_kernel<<<unsigned(H), kThreads, size_t(shared),
                        static_cast<cudaStream_t>(stream)>>>(
      scores, sizes, starts, members, int(C), int(N), int(taken), int(sinks), recent_begin, n,
      last_selected, W, step, oldest_hit, reinterpret_cast<unsigned long long*>(hits), out,
      width);
}

}  // namespace kvb::cuda
