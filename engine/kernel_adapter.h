// The one adapter between LibTorch tensors and the kernels: for each call it picks the CPU
// kernel of kernels/ (CPU tensors in its layout and dtypes), the CUDA kernel of kernels/cuda/
// (CUDA tensors, on a build against a CUDA LibTorch: KVBENCH_CUDA_KERNELS) or ATen (any device
// and dtype), so that methods and the session never branch on the device. Each function below
// says which dtypes its kernels take.
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "engine/model/llama_layers.h"

namespace kvb {

// True when a kernel runs this decode attention over `units` attention units: the CPU kernel
// (CPU tensors, contiguous f32/bf16/f16 pools: 16-bit pools are read at half the bytes) or, on
// a CUDA build, the CUDA kernel (f32/bf16/f16 pools, g = Hq / units <= 8, d <= 256). Otherwise
// the engine gathers the rows and uses ATen.
bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                const at::Tensor& v_pool, int64_t units);

// Sparse GQA decode attention over the pools of a LayerKV, read in place.
//   q: [Hq, d]; k_pool, v_pool: [rows, d] contiguous;
//   indptr: [units + 1] int64: unit u attends n_u = indptr[u + 1] - indptr[u] rows of
//   rows: int64 physical pool rows, [nnz] (unit u's from indptr[u]) or [units, n] (unit u's
//   in its row; any stride between rows, so a view of a wider row table is read in place);
//   a unit is a KV head serving Hq / units query heads (units = Hq: one query head each);
//   longest: an upper bound of a unit's rows when the host knows one (sizes the CUDA kernel's
//   split; -1: all rows); host_counts: each unit's n_u when the host knows them, else empty.
// Returns out [Hq, d] in q's dtype (computed in fp32). When `probs` is non-null it receives per
// unit [Hq / units, n_u] fp32 softmax probabilities (views of one buffer on q's device; on a
// GPU without host_counts, reading indptr waits for the device).
at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale,
                                   std::vector<at::Tensor>* probs, int64_t longest = -1,
                                   const std::vector<int64_t>& host_counts = {});

// Which implementation runs a scoring call: kAuto picks the CPU kernel (fp32 CPU inputs in
// its layout), the CUDA kernel (fp32 CUDA inputs, a build with KVBENCH_CUDA_KERNELS) or ATen
// (any device and dtype); kAten forces ATen (tests compare the paths).
enum class KernelPath { kAuto, kAten };

// Llama's RMSNorm (engine/model/llama_layers.h rms_norm) for inference, without autograd: one
// kernel call (kernels/rms_norm.h) where rms_norm_supported, instead of ATen's 6 operators in
// fp32, 8 in bf16; ATen's otherwise or with kAten. Supported: x [..., D] and weight [D]
// contiguous, of one dtype, on the CPU in fp32 or bf16, or (CUDA build) on one CUDA device in
// fp32, bf16 or fp16. Returns [..., D] in x's dtype.
bool rms_norm_supported(const at::Tensor& x, const at::Tensor& weight);
at::Tensor inference_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                              KernelPath path = KernelPath::kAuto);
// A block's residual add and the RMSNorm after it (the residual stream of a decode step: x +
// the attention's or MLP's output, normalised for what comes next), in one kernel call where
// rms_norm_supported and `residual` has x's shape, dtype and layout; else ATen's add and
// inference_rms_norm. sum: x + residual, the bits of ATen's add; normed: its RMSNorm.
struct AddedAndNormed {
  at::Tensor sum, normed;
};
AddedAndNormed inference_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                      const at::Tensor& weight, double eps,
                                      KernelPath path = KernelPath::kAuto);

// A LayerKV's new rows, k_pool.index_copy_(0, rows, k) and v_pool.index_copy_(0, rows, v), in
// one kernel call (kernels/kv_rows.h) where the pools [R, d] and k, v [n, d] are contiguous and
// of one dtype and rows is [n] int64 (any stride: a column of a block table), all on the CPU
// or (CUDA build) on one CUDA device; ATen's two calls otherwise. rows: distinct pool rows.
void write_kv_rows(at::Tensor& k_pool, at::Tensor& v_pool, const at::Tensor& rows,
                   const at::Tensor& k, const at::Tensor& v);

// Rotary embedding (engine/model/llama_layers.h apply_rope) in one kernel call
// (kernels/rope.h) where one takes the inputs: rotate-half pairs, x [..., L, d] contiguous,
// the angles' cos / sin [L, r] of x's dtype, on the CPU in fp32 or bf16 or (CUDA build) on x's
// CUDA device in fp32, bf16 or fp16. The same bits as apply_rope, which runs otherwise (4 ATen
// operators, 5 when r < d). Same signature as apply_rope (llama_layers' RopeFn).
at::Tensor inference_apply_rope(const at::Tensor& x, const RopeAngles& angles);

// Quest's page score, an upper bound of q.k over every key of a page:
//   score[h, j, p] = sum_c max(q[h, j, c] * kmax[h, p, c], q[h, j, c] * kmin[h, p, c])
// q: [H, g, d] any floating dtype; kmin, kmax: [H, P, d] (the CPU kernel takes views of a
// preallocated [H, capacity, d] buffer in place). Returns [H, g, P] fp32, or [H, 1, P] summed
// over the group when sum_group.
// With `fold`, the decode step's key is first folded into the summaries as quest_fold_key folds
// it (kmin, kmax written there): head h's key is row rows[h] of k_pool ([R, d]; rows [H] int64
// on its device), into page `page`. On a GPU (CUDA build) in the scoring's own launch, the
// key read in place, where the scoring kernel reads the summaries in place; else a fold first.
struct QuestKeyFold {
  at::Tensor k_pool, rows;
  int64_t page = 0;
  bool fresh = false;
};
at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax,
                             bool sum_group, KernelPath path = KernelPath::kAuto,
                             const QuestKeyFold* fold = nullptr);

// Quest's page summaries after a decode step's key (quest.cpp on_append), in place: k [H, d]
// (any floating dtype, cast to the summaries') widens kmin, kmax [H, cap, d]'s page `page`
// (kmin = minimum(kmin, k), kmax = maximum(kmax, k): a NaN wins), or sets both to k when
// `fresh` (a new page). One kernel call on a CUDA device (kvbench_cuda.h quest_fold_key) where
// the three are contiguous and of one dtype; ATen's two operators (and two views) otherwise or
// with kAten.
void quest_fold_key(at::Tensor& kmin, at::Tensor& kmax, const at::Tensor& k, int64_t page,
                    bool fresh, KernelPath path = KernelPath::kAuto);

// Quest's entries of a decode step (quest.cpp select_rows), per unit (a row of scores): the
// pages 0..pages-1 ranked as a stable descending sort of their scores ranks them (ties to the
// lower page, as quest_rank_pages); the first `whole` give all their page_size entries, the
// next one its first `part` (< page_size), and the current page its entries
// pages * page_size .. n - 1 (pages * page_size <= n; none when n is the first).
// scores: [units, P] fp32, P >= pages, whole + (part > 0) <= pages.
// Returns [units, whole * page_size + part + n - pages * page_size] int64 logical entries,
// ascending. One kernel on a GPU (CUDA build: kernels/cuda/top_pages.cu), else ATen's sorts.
at::Tensor top_page_entries(const at::Tensor& scores, int64_t pages, int64_t whole, int64_t part,
                            int64_t page_size, int64_t n, KernelPath path = KernelPath::kAuto);

// PQCache's selection: per row, the leading entries 0 .. lead - 1 (its sinks), then lead + the
// indices of the k largest of the row's scores, ascending (its candidates' top-k), then the
// trailing entries lead + n .. lead + n + trailing - 1 (its window and current entry).
// scores: [rows, n] fp32, 0 <= k <= n. Returns [rows, lead + k + trailing] int64, ascending.
// Ties at the k-th score go to the lower indices, NaN ranks above every number, on every
// device. On a GPU (CUDA build) one kernel, top_page_entries' with pages of one entry; on the
// CPU for fp32 scores with unit column stride kernels/top_k.h; else ATen's operators (topk for
// the k-th score, the ties counted in index order).
at::Tensor top_k_ascending(const at::Tensor& scores, int64_t k, int64_t lead, int64_t trailing,
                           KernelPath path = KernelPath::kAuto);

// InfiniGen's fetch, its size counted on the device: per row, the indices of the best
// min(k, limit - 1) of the row's n scores, ascending, then n, then n repeated:
// [rows, k + 1] int64. limit: an int64 scalar on the scores' device, never read by the host.
// scores: [rows, n] fp32, 0 <= k <= n. Where scores tie at the last place taken (NaNs too),
// the GPU kernel takes the lower indices and ATen's topk (the CPU path) whichever it meets:
// either is a top set. On a GPU (CUDA build) one launch (top_page_entries' kernel with the
// limit read on the device) for ATen's six (topk, a rank mask, a pad, a sort).
at::Tensor top_k_ascending_then_last(const at::Tensor& scores, const at::Tensor& limit,
                                     int64_t k, KernelPath path = KernelPath::kAuto);

// PQ table scores, approximate q.k from product-quantisation codes, each times `scale`:
//   q: [H, g, m*s] any floating dtype; centroids: [H, m, K, s]; codes: [H, m, n] any integer
//   dtype (K <= 256 for the kernels, whose codes are uint8). Returns [H, g, n] fp32. The scale
//   is the CUDA kernel's last multiplication (no launch of its own), ATen's after the others.
at::Tensor pq_scores(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                     double scale = 1.0, KernelPath path = KernelPath::kAuto);

// PQCache's selection of a decode step for every KV head: what
//   top_k_ascending(at::softmax(pq_scores(q, centroids, codes, scale), -1).sum(1), k, lead,
//                   trailing)
// returns (the softmax over the n tokens per query head, summed over the group), computed per
// code combination where there are at most kernels::kPqMaxCombinations of them (K^m; PQCache's
// m = 2, b = 6 give 4096): the CPU kernel (kernels/pq_scoring.h pq_top_k, fp32 CPU centroids)
// or, on a GPU (CUDA build), one kernel. Their weights equal the composition's up to rounding,
// so the selections can differ only where two combinations' weights are within a rounding of
// each other at the k-th. Otherwise, and with kAten, the composition itself (kAten: ATen's
// operators throughout). q, centroids, codes as pq_scores takes them (codes < K: the kernels
// do not check), 0 <= k <= n.
// Returns [H, lead + k + trailing] int64, ascending.
at::Tensor pq_top_k(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                    double scale, int64_t k, int64_t lead, int64_t trailing,
                    KernelPath path = KernelPath::kAuto);

// PQCache's codes of keys in a KV pool, written in place: codes[h, u, column + j] = the id of
// the centroid of centroids[h, u] nearest (squared distance, fp32) the u-th sub-vector of the
// key at pool row rows[h, j]; ties to the lower id. centroids: [H, m, K, s] fp32; k_pool:
// [pool rows, m * s] any floating dtype; rows: [H, n] int64; codes: [H, m, >= column + n] of
// any integer dtype (uint8 for the kernel). One kernel on a GPU (keys read in place), else
// ATen's direct differences.
void pq_encode_rows(const at::Tensor& centroids, const at::Tensor& k_pool, const at::Tensor& rows,
                    at::Tensor& codes, int64_t column, KernelPath path = KernelPath::kAuto);

// ClusterKV's K-means steps (the CPU kernels for fp32 CPU inputs; on a CUDA build, the centroid
// update's CUDA kernel for CUDA inputs and the assignment's for 16-bit CUDA keys with d a
// multiple of 16 up to 128, on tensor cores, the argmax fused; else ATen).
// Labels of each key: the centroid of largest cosine similarity (ties: the lowest id), found as
// the largest k.c_hat (centroids L2-normalised; the keys need not be). The products run in the
// keys' dtype (any floating dtype; the CPU kernel for fp32 CPU keys). keys: [H, n, d],
// centroids: [H, C, d] any floating dtype. Returns [H, n] int64. The ATen path scores chunks
// of keys whose similarities [H, chunk, C] hold at most `block_elements` (a chunk has at least
// one key); the labels do not depend on it beyond rounding. 64 Mi (256 MiB of fp32
// similarities): on an H200 (2026-11-30, gpu_cosine_assign_block) a Lloyd step's assignment
// at 128k took 14.5 ms in fp32 against 16.9 in chunks of 16 Mi and 13.2 in 256 Mi (1 GiB).
constexpr int64_t kAssignBlockElements = int64_t(64) << 20;
// Keys per chunk of that ATen path for H heads and C centroids: at least one.
inline int64_t cosine_assign_chunk(int64_t H, int64_t C, int64_t block_elements) {
  return std::max<int64_t>(1, block_elements / std::max<int64_t>(1, H * C));
}
at::Tensor cosine_assign(const at::Tensor& keys, const at::Tensor& centroids,
                         KernelPath path = KernelPath::kAuto,
                         int64_t block_elements = kAssignBlockElements);
// x [..., d] with each row scaled to L2 norm 1 (a zero row stays zero), in x's dtype: how
// cosine_assign normalises its centroids (in fp32, then cast to the keys' dtype).
at::Tensor unit_rows(const at::Tensor& x);
// New centroids: the mean of the RAW member keys; a cluster without members keeps `old`.
// keys: [H, n, d], labels: [H, n], old: [H, C, d]. Returns [H, C, d] float32.
at::Tensor cluster_means(const at::Tensor& keys, const at::Tensor& labels, const at::Tensor& old,
                         KernelPath path = KernelPath::kAuto);
// ClusterKV's selection for every head at once: the first `take` members of the clusters in
// rank order, the last one cut short. ranked: [H, C] cluster ids, best first; sizes, starts:
// [H, C] by cluster id (starts: a cluster's first place in members); members: [H, N] entry ids
// grouped by cluster; 0 <= take <= N. Returns [H, take] int64, in rank order. ATen's (any
// device); cluster_rows below is a decode step's selection in one kernel on a GPU.
at::Tensor cluster_members_in_rank_order(const at::Tensor& ranked, const at::Tensor& sizes,
                                         const at::Tensor& starts, const at::Tensor& members,
                                         int64_t take);

// ClusterKV's cache of the last R steps (clusterkv.cpp), kept during a selection: the step each
// entry was last selected, and the counter its hits go to.
struct ClusterCacheStep {
  at::Tensor last_selected;  // [H, >= n] int64 on the device: an entry's last step, or -1
  int64_t step = 0;          // this step, written for every selected member
  int64_t oldest_hit = 0;    // a member last selected at this step or after is a hit
  at::Tensor hits;           // int64 scalar on the device: the step's hits are added to it
};

// ClusterKV's rows of a decode step for every KV head at once, ascending: the sinks
// 0 .. sinks - 1; the first `take` members of the clusters in the order of a stable descending
// sort of their scores (cluster_members_in_rank_order's, the last one cut short); the recent
// entries recent_begin .. n - 1. scores: [H, C] fp32 (read only when take > 0); sizes,
// starts, members as cluster_members_in_rank_order takes them, every member in
// sinks .. recent_begin - 1; 0 <= take <= N. With `cache`, each selected member's hit is
// counted and its step written (ClusterCacheStep). Returns [H, sinks + take + n - recent_begin]
// int64. On a GPU (CUDA build) one kernel (kernels/cuda/cluster_rows.cu) where the index is
// int32 (ClusterKV's on a GPU) and a block's shared memory holds C counts and n entries' bits;
// else ATen's sort, gathers, scatter, and the rows' concatenation and sort.
at::Tensor cluster_rows(const at::Tensor& scores, const at::Tensor& sizes, const at::Tensor& starts,
                        const at::Tensor& members, int64_t take, int64_t sinks,
                        int64_t recent_begin, int64_t n, const ClusterCacheStep* cache,
                        KernelPath path = KernelPath::kAuto);

}  // namespace kvb
