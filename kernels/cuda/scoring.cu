// Quest page scoring, PQCache table scoring and PQCache's codes of new keys.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/element_cast.cuh"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/warp_sum.cuh"

namespace kvb::cuda {
namespace {

constexpr int kThreads = 256;
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

constexpr int kWarpsPerBlock = kThreads / 32;

// Pages a warp scores, one after another: the block stages the group's queries once for
// kWarpsPerBlock * kQuestPagesPerWarp pages. With a page a warp, a 128k prompt made 8192
// blocks of 8 pages, each staging q before its one load of pages, and the kernel read 0.76
// TB/s (44 us a layer on the H100, 2026-11-27; 20 us at 32k for a quarter of the bytes).
constexpr int kQuestPagesPerWarp = 4;

// The scalar path (quest_vector_kernel below where a page's row allows: Llama's does):
// grid (ceil(P / (kWarpsPerBlock * kQuestPagesPerWarp)), H); a warp per page, its lanes
// striding over the page's channels, so a warp's loads are consecutive (a thread per page, as
// once, touched 32 lines 4 * d bytes apart per load); a block's warps take neighbouring pages
// at each of their kQuestPagesPerWarp turns. The group's queries in shared memory. A score
// sums each lane's channels, then the lanes by a butterfly: not the CPU kernel's order.
template <typename T>
__global__ void quest_kernel(const void* q, kernels::KvElement q_type, const T* kmin, const T* kmax,
                             float* scores, int g, int P, int d, int64_t head_stride,
                             bool sum_group) {
  extern __shared__ float qs[];  // [g, d] widened
  const int h = blockIdx.y;
  for (int x = threadIdx.x; x < g * d; x += blockDim.x)
    qs[x] = load_element(q, q_type, int64_t(h) * g * d + x);
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int first = blockIdx.x * kWarpsPerBlock * kQuestPagesPerWarp + threadIdx.x / 32;
  for (int turn = 0; turn < kQuestPagesPerWarp; ++turn) {
    const int p = first + turn * kWarpsPerBlock;
    if (p >= P) return;  // the whole warp: p is the warp's
    const T* lo = kmin + h * head_stride + int64_t(p) * d;
    const T* hi = kmax + h * head_stride + int64_t(p) * d;
    float total = 0.f;
    for (int i = 0; i < g; ++i) {
      float s = 0.f;
      for (int c = lane; c < d; c += 32) {
        const float qc = qs[i * d + c];
        s += fmaxf(qc * widen(hi[c]), qc * widen(lo[c]));
      }
      s = warp_sum(s);
      if (sum_group) total += s;
      else if (lane == 0) scores[(int64_t(h) * g + i) * P + p] = s;
    }
    if (sum_group && lane == 0) scores[int64_t(h) * P + p] = total;
  }
}

// Pages each lane group of quest_vector_kernel loads at once: their minima and maxima (16
// bytes a lane each) are all in flight before the first is scored, since the scores are bound
// by the bytes in flight, as decode attention is.
constexpr int kQuestPagesInFlight = 4;

// Quest's page scores where a page's summary row is a power of two (2 to 32) of 16-byte
// vectors and the summaries are 16-byte aligned (Llama's d = 128 in bf16: 16 lanes a page, two
// pages a warp-load). grid (ceil(P / kPagesPerBlock), H): each lane loads its E = 16 /
// sizeof(T) channels of kQuestPagesInFlight pages' minima and maxima, then scores them against
// the group's queries (shared memory). quest_kernel's loads were 2-4 bytes a lane, one page at
// a time: 0.76 TB/s at 128k on the H100 (2026-11-27). A score sums a lane's channels, then the
// group's lanes; summed over the group, each lane sums its channels over the query heads
// first, so one butterfly a page.
// At most 64 registers a thread (4 blocks an SM): the bytes in flight are what bound the
// scores, and the fold's branch (one lane group of one block) took the count to 72.
template <typename T, int LPR>
__global__ void __launch_bounds__(kThreads, 4)
    quest_vector_kernel(const void* q, kernels::KvElement q_type, T* kmin, T* kmax,
                        float* scores, int g, int P, int64_t head_stride, bool sum_group,
                        QuestFold fold) {
  constexpr int E = 16 / sizeof(T), d = LPR * E, kGroups = 32 / LPR;
  constexpr int kPagesPerWarp = kGroups * kQuestPagesInFlight;
  extern __shared__ float qs[];  // [g, d] widened
  const int h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / LPR, c0 = (lane % LPR) * E;
  // Page of turn r: first + r * kGroups (neighbouring lane groups read neighbouring pages).
  const int first = (int(blockIdx.x) * kWarpsPerBlock + warp) * kPagesPerWarp + group;
  T* const lo_head = kmin + h * head_stride;
  T* const hi_head = kmax + h * head_stride;
  uint4 lo_raw[kQuestPagesInFlight], hi_raw[kQuestPagesInFlight];
#pragma unroll
  for (int r = 0; r < kQuestPagesInFlight; ++r) {
    const int p = first + r * kGroups;
    // A fresh page's summaries are set from the key below, never read: not loaded (its bytes
    // are unwritten memory, which compute-sanitizer's initcheck reports).
    const bool valid = p < P && !(fold.pool && fold.fresh && p == fold.page);
    lo_raw[r] = valid ? *reinterpret_cast<const uint4*>(lo_head + int64_t(p) * d + c0) : uint4{};
    hi_raw[r] = valid ? *reinterpret_cast<const uint4*>(hi_head + int64_t(p) * d + c0) : uint4{};
  }
  // The queries are staged while the pages' loads are in flight: a block makes one round of
  // loads, so staging first put a read of q and a barrier before every block's first byte.
  for (int x = threadIdx.x; x < g * d; x += blockDim.x)
    qs[x] = load_element(q, q_type, int64_t(h) * g * d + x);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kQuestPagesInFlight; ++r) {
    const int p = first + r * kGroups;
    const bool writes = p < P && lane % LPR == 0;
    float lo[E], hi[E];
    unpack_vector<T, E>(lo_raw[r], lo);
    unpack_vector<T, E>(hi_raw[r], hi);
    if (fold.pool && p == fold.page) {  // the step's key into its page, then scored
      const T* const pool = static_cast<const T*>(fold.pool);
      float key[E];
      unpack_vector<T, E>(*reinterpret_cast<const uint4*>(
                              pool + fold.rows[int64_t(h) * fold.rows_stride] * d + c0),
                          key);
#pragma unroll
      for (int c = 0; c < E; ++c) {
        lo[c] = fold.fresh ? key[c] : min_keeping_nan(lo[c], key[c]);
        hi[c] = fold.fresh ? key[c] : max_keeping_nan(hi[c], key[c]);
      }
      *reinterpret_cast<uint4*>(lo_head + int64_t(p) * d + c0) = pack_vector<T, E>(lo);
      *reinterpret_cast<uint4*>(hi_head + int64_t(p) * d + c0) = pack_vector<T, E>(hi);
    }
    float total = 0.f;
    for (int i = 0; i < g; ++i) {
      const float* qi = qs + i * d + c0;  // [E], 16-byte aligned: E is 4 or 8 floats
      float s = 0.f;
#pragma unroll
      for (int v = 0; v < E / 4; ++v) {
        const float4 q4 = reinterpret_cast<const float4*>(qi)[v];
        const float qv[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) s += fmaxf(qv[c] * hi[4 * v + c], qv[c] * lo[4 * v + c]);
      }
      if (sum_group) {
        total += s;
      } else {
        s = lane_group_sum<LPR>(s);
        if (writes) scores[(int64_t(h) * g + i) * P + p] = s;
      }
    }
    if (sum_group) {
      total = lane_group_sum<LPR>(total);
      if (writes) scores[int64_t(h) * P + p] = total;
    }
  }
}

template <typename T, int LPR>
void launch_quest_vector(const void* q, kernels::KvElement q_type, void* kmin, void* kmax,
                         float* scores, int64_t H, int64_t g, int64_t P, int64_t head_stride,
                         bool sum_group, const QuestFold& fold, cudaStream_t stream) {
  constexpr int64_t d = LPR * (16 / int64_t(sizeof(T)));
  constexpr int64_t pages_per_block = int64_t(kWarpsPerBlock) * (32 / LPR) * kQuestPagesInFlight;
  const dim3 grid(unsigned((P + pages_per_block - 1) / pages_per_block), unsigned(H));
  quest_vector_kernel<T, LPR><<<grid, kThreads, size_t(g * d) * sizeof(float), stream>>>(
      q, q_type, static_cast<T*>(kmin), static_cast<T*>(kmax), scores, int(g), int(P),
      head_stride, sum_group, fold);
}

// Quest's fold of a step's key into page `page` of its summaries: a thread per (head,
// channel). k: [H, d] of the summaries' type, or with k_rows the pool [rows, d] whose row
// k_rows[h * k_rows_stride] is head h's key.
__global__ void quest_fold_key_kernel(void* kmin, void* kmax, kernels::KvElement type,
                                      const void* k, const int64_t* k_rows,
                                      int64_t k_rows_stride, int64_t H, int64_t d,
                                      int64_t head_stride, int64_t page, bool fresh) {
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < H * d;
       x += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = x / d, at = h * head_stride + page * d + x % d;
    const float key =
        load_element(k, type, k_rows ? k_rows[h * k_rows_stride] * d + x % d : x);
    const float lo = fresh ? key : min_keeping_nan(load_element(kmin, type, at), key);
    const float hi = fresh ? key : max_keeping_nan(load_element(kmax, type, at), key);
    store_element(kmin, type, at, lo);
    store_element(kmax, type, at, hi);
  }
}

void launch_fold(void* kmin, void* kmax, kernels::KvElement type, const void* k,
                 const int64_t* k_rows, int64_t k_rows_stride, int64_t H, int64_t d,
                 int64_t head_stride, int64_t page, bool fresh, cudaStream_t stream) {
  if (H == 0 || d == 0) return;
  const int64_t blocks = std::min<int64_t>((H * d + kThreads - 1) / kThreads, 65535);
  quest_fold_key_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(
      kmin, kmax, type, k, k_rows, k_rows_stride, H, d, head_stride, page, fresh);
}

template <typename T>
void launch_quest(const void* q, kernels::KvElement q_type, void* kmin, void* kmax,
                  kernels::KvElement type, float* scores, int64_t H, int64_t g, int64_t P,
                  int64_t d, int64_t head_stride, bool sum_group, void* stream,
                  const QuestFold* fold) {
  const cudaStream_t s = as_stream(stream);
  const bool aligned = reinterpret_cast<uintptr_t>(kmin) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(kmax) % 16 == 0 &&
                       (head_stride * int64_t(sizeof(T))) % 16 == 0 &&
                       (!fold || reinterpret_cast<uintptr_t>(fold->pool) % 16 == 0);
  const QuestFold none{nullptr, nullptr, 0, -1, false};
  if (launch_with_vector_lanes(vector_row_lanes(d * int64_t(sizeof(T)), aligned), [&](auto lanes) {
        launch_quest_vector<T, decltype(lanes)::value>(q, q_type, kmin, kmax, scores, H, g, P,
                                                        head_stride, sum_group,
                                                        fold ? *fold : none, s);
      }))
    return;
  if (fold)
    launch_fold(kmin, kmax, type, fold->pool, fold->rows, fold->rows_stride, H, d, head_stride,
                fold->page, fold->fresh, s);
  const int64_t pages_per_block = int64_t(kWarpsPerBlock) * kQuestPagesPerWarp;
  const dim3 grid(unsigned((P + pages_per_block - 1) / pages_per_block), unsigned(H));
  quest_kernel<T><<<grid, kThreads, size_t(g * d) * sizeof(float), s>>>(
      q, q_type, static_cast<const T*>(kmin), static_cast<const T*>(kmax), scores, int(g),
      int(P), int(d), head_stride, sum_group);
}

// Tokens per thread of pq_kernel: the table is built once per block, so a block takes
// kThreads * 8 tokens (as many blocks as tokens / 256 rebuilt it up to 128 times per head at 32k).
constexpr int kPqTokensPerThread = 8;

// Shared memory of pq_kernel<true>: the table [g, m, K], q [g, m * s] widened and the head's
// centroids [m, K, s + 1] (a row padded by one float, so the threads of a warp, one centroid
// each, read 32 different banks).
size_t pq_staged_floats(int64_t g, int64_t m, int64_t K, int64_t s) {
  return size_t(g * m * K + g * m * s + m * K * (s + 1));
}

// grid (ceil(n / (kThreads * kPqTokensPerThread)), H): table [g, m, K] in shared memory, then
// the block's threads stride over its tokens. kStaged: q and the head's centroids are first
// copied into shared memory by all threads at once. Without it (centroids beyond 48 KiB) each
// thread reads its entry's centroid from global memory, s floats apart from its neighbours',
// one load after another: about 30 us a block on the H100 (the kernel took 38 us at 32k, one
// wave of blocks, 2026-11-26). Either way an entry sums its channels in order, so both give
// the same bits.
template <bool kStaged>
__global__ void pq_kernel(const void* q, kernels::KvElement q_type, const float* centroids,
                          const uint8_t* codes, float* scores, int g, int m, int K, int s, int n,
                          int64_t codes_row, float scale) {
  extern __shared__ float table[];  // [g, m, K], then (kStaged) q [g, m*s], centroids [m, K, s+1]
  const int h = blockIdx.y;
  float* const q_shared = table + g * m * K;
  float* const c_shared = q_shared + g * m * s;
  const float* head_centroids = centroids + int64_t(h) * m * K * s;
  if (kStaged) {
    for (int x = threadIdx.x; x < g * m * s; x += blockDim.x)
      q_shared[x] = load_element(q, q_type, int64_t(h) * g * m * s + x);
    for (int x = threadIdx.x; x < m * K * s; x += blockDim.x)
      c_shared[(x / s) * (s + 1) + x % s] = head_centroids[x];
    __syncthreads();
  }
  for (int e = threadIdx.x; e < g * m * K; e += blockDim.x) {
    const int gi = e / (m * K), i = (e / K) % m, c = e % K;
    float acc = 0.f;
    if (kStaged) {
      const float* qv = q_shared + (gi * m + i) * s;
      const float* cs = c_shared + (i * K + c) * (s + 1);
      for (int x = 0; x < s; ++x) acc += qv[x] * cs[x];
    } else {
      const int64_t qs = (int64_t(h) * g + gi) * m * s + i * s;  // q's sub-vector i, widened
      const float* cs = head_centroids + (int64_t(i) * K + c) * s;
      for (int x = 0; x < s; ++x) acc += load_element(q, q_type, qs + x) * cs[x];
    }
    table[e] = acc;
  }
  __syncthreads();
  const int64_t first = int64_t(blockIdx.x) * blockDim.x * kPqTokensPerThread;
  const int64_t end = min(int64_t(n), first + int64_t(blockDim.x) * kPqTokensPerThread);
  for (int64_t j = first + threadIdx.x; j < end; j += blockDim.x)
    for (int gi = 0; gi < g; ++gi) {
      float total = 0.f;
      for (int i = 0; i < m; ++i)
        total += table[(gi * m + i) * K + codes[(int64_t(h) * m + i) * codes_row + j]];
      scores[(int64_t(h) * g + gi) * n + j] = total * scale;  // ATen's scores * scale
    }
}

// PQ encoding: whether distance a (centroid ia) ranks before b (centroid ib) as ATen's argmin
// ranks them: NaN first, then the smaller, ties to the lower id.
__device__ inline bool nearer(float a, int ia, float b, int ib) {
  if (isnan(a) != isnan(b)) return isnan(a);
  return a < b || (!(b < a) && ia < ib);
}

// grid (n, m, H), a thread per centroid (K <= blockDim.x <= 256): the sub-vector u of the key at
// pool row rows[h, j], widened into shared memory, against centroid c's s channels by squared
// difference; the block's nearest centroid is the code.
__global__ void pq_encode_kernel(const void* k_pool, kernels::KvElement type, const int64_t* rows,
                                 int64_t rows_stride, const float* centroids, uint8_t* codes,
                                 int64_t codes_head, int64_t codes_row, int64_t column, int m,
                                 int K, int s) {
  extern __shared__ float x[];  // [s] the key's sub-vector u, widened
  __shared__ float warp_dist[kWarpsPerBlock];
  __shared__ int warp_id[kWarpsPerBlock];
  const int j = blockIdx.x, u = blockIdx.y, h = blockIdx.z, c = threadIdx.x;
  const int64_t row = rows[h * rows_stride + j];
  for (int i = threadIdx.x; i < s; i += blockDim.x)
    x[i] = load_element(k_pool, type, row * int64_t(m) * s + int64_t(u) * s + i);
  __syncthreads();
  float dist = INFINITY;
  int id = INT_MAX;  // a thread past K never ranks before a centroid
  if (c < K) {
    const float* mu = centroids + ((int64_t(h) * m + u) * K + c) * s;  // [s]
    dist = 0.f;
    for (int i = 0; i < s; ++i) {
      const float e = x[i] - mu[i];
      dist += e * e;
    }
    id = c;
  }
  for (int offset = 16; offset > 0; offset /= 2) {  // the warp's nearest
    const float od = __shfl_down_sync(0xffffffffu, dist, offset);
    const int oi = __shfl_down_sync(0xffffffffu, id, offset);
    if (nearer(od, oi, dist, id)) dist = od, id = oi;
  }
  if (c % 32 == 0) warp_dist[c / 32] = dist, warp_id[c / 32] = id;
  __syncthreads();
  if (c == 0) {
    for (int w = 1; w < int(blockDim.x) / 32; ++w)
      if (nearer(warp_dist[w], warp_id[w], dist, id)) dist = warp_dist[w], id = warp_id[w];
    codes[h * codes_head + u * codes_row + column + j] = uint8_t(id);
  }
}

}  // namespace

void quest_fold_key(void* kmin, void* kmax, kernels::KvElement type, const void* k, int64_t H,
                    int64_t d, int64_t head_stride, int64_t page, bool fresh, void* stream) {
  launch_fold(kmin, kmax, type, k, nullptr, 0, H, d, head_stride, page, fresh, as_stream(stream));
}

void quest_page_scores(const void* q, kernels::KvElement q_type, void* kmin, void* kmax,
                       kernels::KvElement summary_type, float* scores, int64_t H, int64_t g,
                       int64_t P, int64_t d, int64_t head_stride, bool sum_group, void* stream,
                       const QuestFold* fold) {
  if (H == 0 || P == 0) return;
  if (fold && (fold->page < 0 || fold->page >= P))
    throw std::invalid_argument("kvb::cuda::quest_page_scores: the fold's page is not one of P");
  switch (summary_type) {
    case kernels::KvElement::kF32:
      return launch_quest<float>(q, q_type, kmin, kmax, summary_type, scores, H, g, P, d,
                                 head_stride, sum_group, stream, fold);
    case kernels::KvElement::kBF16:
      return launch_quest<__nv_bfloat16>(q, q_type, kmin, kmax, summary_type, scores, H, g, P,
                                         d, head_stride, sum_group, stream, fold);
    case kernels::KvElement::kF16:
      return launch_quest<__half>(q, q_type, kmin, kmax, summary_type, scores, H, g, P, d,
                                  head_stride, sum_group, stream, fold);
  }
}

void pq_scores(const void* q, kernels::KvElement q_type, const float* centroids,
               const uint8_t* codes, float* scores, int64_t H, int64_t g, int64_t m, int64_t K,
               int64_t s, int64_t n, int64_t codes_row, float scale, void* stream) {
  if (H == 0 || n == 0) return;
  const int64_t per_block = int64_t(kThreads) * kPqTokensPerThread;
  const dim3 grid(unsigned((n + per_block - 1) / per_block), unsigned(H));
  const size_t staged = pq_staged_floats(g, m, K, s) * sizeof(float);
  if (staged <= 48 * 1024)  // the default limit: Llama's d = 128 at m = 2, K = 64 takes 37 KiB
    pq_kernel<true><<<grid, kThreads, staged, as_stream(stream)>>>(
        q, q_type, centroids, codes, scores, int(g), int(m), int(K), int(s), int(n), codes_row,
        scale);
  else
    pq_kernel<false><<<grid, kThreads, size_t(g * m * K) * sizeof(float), as_stream(stream)>>>(
        q, q_type, centroids, codes, scores, int(g), int(m), int(K), int(s), int(n), codes_row,
        scale);
}

void pq_encode(const void* k_pool, kernels::KvElement type, const int64_t* rows,
               int64_t rows_stride, const float* centroids, uint8_t* codes, int64_t codes_head,
               int64_t codes_row, int64_t column, int64_t H, int64_t n, int64_t m, int64_t K,
               int64_t s, void* stream) {
  if (K < 1 || K > kThreads)  // a thread per centroid; the block reduction holds kWarpsPerBlock
    throw std::invalid_argument("kvb::cuda::pq_encode: needs 1 <= K <= 256 centroids");
  if (H == 0 || n == 0 || m == 0) return;
  const int threads = int((K + 31) / 32 * 32);
  pq_encode_kernel<<<dim3(unsigned(n), unsigned(m), unsigned(H)), threads,
                     size_t(s) * sizeof(float), as_stream(stream)>>>(
      k_pool, type, rows, rows_stride, centroids, codes, codes_head, codes_row, column, int(m),
      int(K), int(s));
}

}  // namespace kvb::cuda
