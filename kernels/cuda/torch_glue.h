// LibTorch glue for the CUDA kernels of kernels/cuda/kvbench_cuda.h: at::Tensor in, at::Tensor
// out, the GPU counterparts of the CPU adapter in engine/kernel_adapter.h.
//
// Built only against a CUDA LibTorch with -DKVBENCH_CUDA=ON (ci/setup.sh --cuda): then
// kernels/cuda/torch_glue.cpp is linked into kvbench_core and KVBENCH_CUDA_KERNELS=1 is defined
// for every user of kvbench_core; elsewhere this header's functions do not exist, so include
// and call them only under `#if KVBENCH_CUDA_KERNELS`. (On a CPU LibTorch, ci/cuda_build.sh
// compiles torch_glue.cpp without linking it, so it cannot rot.)
//
// Every function:
// - takes CUDA tensors, all on one device, and returns tensors on that device;
// - runs on that device's current stream (at::cuda::getCurrentCUDAStream), asynchronously: no
//   host synchronisation, no host reads of the inputs (so preconditions on *values*, such as
//   labels < C, are the caller's, not checked);
// - converts inputs as the CPU adapter does (fp32 computation; any floating q; any integer
//   codes, labels, ids), copying only where dtype or layout require it;
// - throws std::invalid_argument for inputs it does not take (wrong device, dtype, shape, or a
//   size beyond the kernel's limits: the `*_supported` predicates say so beforehand) and
//   std::runtime_error when a kernel launch fails.
// Sizes: every dimension below 2^31, H <= 65535 (a grid dimension).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace kvb::cuda {

// ---- Paged sparse GQA decode attention (flash-decoding; kvbench_cuda.h) ------------------------
// out[u*g + i] = softmax(scale * q[u*g + i] . K_u) V_u over the pool rows unit u attends, read
// in place (no gathered copy), fp32 accumulation; an empty unit gives zeros.
//   q:              [units * g, d]  any floating dtype: f32, bf16 and f16 read as they are
//                                   (widened in the kernel), others converted to fp32 first
//   k_pool, v_pool: [pool rows, d]  contiguous, one dtype of f32, bf16, f16 (q's or another)
//   indptr:         [units + 1]     int64; rows: [nnz] int64 pool rows (engine: physical rows),
//                                   unit u's from indptr[u]; or [units, n] with unit u's list
//                                   its row u (unit stride free, elements contiguous: a block
//                                   table's rows, read in place)
//   longest:        an upper bound of any unit's row count (the host's: Selection::max_count,
//                   or nnz), which sizes the split over the sequence without a device read
//   returns:        [units * g, d] in q's dtype
//   probs:          when non-null, receives [g * nnz] fp32 softmax probabilities, unit u's
//                   [g, n_u] at g * indptr[u]; nnz: indptr[units] when the host knows it, else
//                   -1 (read from the device: a synchronisation)
// Supported when the pools are contiguous CUDA tensors of f32/bf16/f16 on q's device, q is a
// CUDA tensor [units * g, d] with g <= 8 and d <= 256.
bool sparse_decode_attention_supported(const at::Tensor& q, const at::Tensor& k_pool,
                                       const at::Tensor& v_pool, int64_t units);
at::Tensor sparse_decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                   const at::Tensor& v_pool, const at::Tensor& indptr,
                                   const at::Tensor& rows, double scale, int64_t longest,
                                   at::Tensor* probs = nullptr, int64_t nnz = -1);

// ---- Llama's RMSNorm (kvbench_cuda.h rms_norm) -------------------------------------------------
// x: [..., D], weight: [D], contiguous, one dtype of f32, bf16, f16, on one CUDA device;
// returns [..., D] in that dtype. One launch.
bool rms_norm_supported(const at::Tensor& x, const at::Tensor& weight);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
// x + residual (x's shape and dtype, both contiguous) and its RMSNorm, in one launch:
// returns {sum, normed}.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                               const at::Tensor& weight, double eps);

// ---- New K and V rows into their pools (kvbench_cuda.h write_kv_rows) ------------------------
// k_pool.index_copy_(0, rows, k) and v_pool.index_copy_(0, rows, v) in one launch: pools
// [pool rows, d] and k, v [n, d] contiguous, of one dtype, rows [n] int64 distinct (any
// stride: a column of a block table), all on one CUDA device.
bool write_kv_rows_supported(const at::Tensor& k_pool, const at::Tensor& v_pool,
                             const at::Tensor& rows, const at::Tensor& k, const at::Tensor& v);
void write_kv_rows(at::Tensor& k_pool, at::Tensor& v_pool, const at::Tensor& rows,
                   const at::Tensor& k, const at::Tensor& v);

// ---- Rotary embedding, rotate-half pairs (kvbench_cuda.h rope_rotate_half) ---------------------
// x: [..., L, d] contiguous; cos, sin: [L, r] contiguous (engine/model/llama_layers' RopeAngles:
// (c, c) and (-s, s)); all one dtype of f32, bf16, f16 on one CUDA device; r even, r <= d.
// Returns [..., L, d] in x's dtype, the bits of ATen's x * cos + swap(x) * sin. One launch.
bool rope_rotate_half_supported(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
at::Tensor rope_rotate_half(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// ---- Quest page scores (https://arxiv.org/abs/2406.10774) ------------------------------------
// score[h, i, p] = sum_c max(q[h, i, c] * kmax[h, p, c], q[h, i, c] * kmin[h, p, c]).
//   q:          [H, g, d]  any floating dtype: f32, bf16 and f16 read as they are, others
//                          converted to fp32; g query heads per KV head
//   kmin, kmax: [H, P, d]  page summaries, fp32, bf16 or f16 (both one dtype; read widened
//                          to fp32). Used in place when pages are d elements apart with
//                          unit channel stride and both share one head stride (e.g. a
//                          narrow(1, 0, P) of a contiguous [H, cap, d] buffer); else copied.
//   returns:    [H, g, P] fp32, or [H, 1, P] summed over the group when sum_group
//               (kvb::quest_page_scores_kernel's shapes).
// Supported when kmin, kmax are CUDA tensors of one shape [H, P, d] and one of those dtypes,
// with d <= 12288 (the group's queries sit in 48 KiB of shared memory; larger g*d is split
// over several launches).
// With `fold`, the decode step's key first folded into page `page` of kmin, kmax in the same
// launch (kvbench_cuda.h QuestFold): head h's key is row rows[h] of pool ([R, d] contiguous,
// the summaries' dtype; rows [H] int64, any stride). Needs quest_fold_in_scores_supported: the
// summaries read in place and the group's queries in one launch.
struct QuestFoldArgs {
  at::Tensor pool, rows;
  int64_t page = 0;
  bool fresh = false;
};
bool quest_page_scores_supported(const at::Tensor& kmin, const at::Tensor& kmax);
bool quest_fold_in_scores_supported(const at::Tensor& q, const at::Tensor& kmin,
                                    const at::Tensor& kmax, const QuestFoldArgs& fold);
at::Tensor quest_page_scores(const at::Tensor& q, const at::Tensor& kmin, const at::Tensor& kmax,
                             bool sum_group, const QuestFoldArgs* fold = nullptr);

// Quest's page summaries after a decode step (kvbench_cuda.h quest_fold_key): k [H, d] into
// kmin, kmax [H, cap, d]'s page `page` (its minimum and maximum widened, or both set to k when
// `fresh`), in place, one launch. Supported when the three are contiguous CUDA tensors of one
// dtype (f32, bf16, f16) on one device and 0 <= page < cap.
bool quest_fold_key_supported(const at::Tensor& kmin, const at::Tensor& kmax, const at::Tensor& k,
                              int64_t page);
void quest_fold_key(at::Tensor& kmin, at::Tensor& kmax, const at::Tensor& k, int64_t page,
                    bool fresh);

// ---- The entries of the best pages (Quest's selection, PQCache's top-k) --------------------------
// Per row, the entries of its best-ranked pages, ascending (engine/kernel_adapter.h
// top_page_entries has the semantics; kvbench_cuda.h top_pages the kernel).
//   scores:  [rows, P] fp32 page scores, unit channel stride, P >= pages
//   returns: [rows, lead + whole * page_size + part + n - pages * page_size] int64, ascending
//   chunk:   kAutoChunk (kvbench_cuda.h top_pages_auto_chunk), 0 (a block per row) or the
//            pages per block of the first of two launches (the same entries every way)
//   limit:   undefined, or an int64 scalar on the scores' device (page_size 1, part 0, some
//            trailing entries): each row takes its best min(whole, limit - trailing) pages,
//            then the trailing entries, then repeats the last one up to the width
// Supported when scores are such a CUDA tensor.
constexpr int64_t kAutoChunk = -1;
bool top_pages_supported(const at::Tensor& scores);
at::Tensor top_pages(const at::Tensor& scores, int64_t pages, int64_t whole, int64_t part,
                     int64_t page_size, int64_t n, int64_t lead = 0, int64_t chunk = kAutoChunk,
                     const at::Tensor& limit = {});

// ---- PQCache scores (https://arxiv.org/abs/2407.12820) ---------------------------------------
// score[h, i, j] = sum_{u < m} q[h, i, u*s : (u+1)*s] . centroids[h, u, codes[h, u, j], :].
//   q:         [H, g, m*s]  any floating dtype (f32, bf16, f16 read as they are, others
//                           converted to fp32)
//   centroids: [H, m, K, s] fp32, K <= 256
//   codes:     [H, m, n]    any integer dtype (converted to uint8), values < K; uint8 rows with
//                           one stride between them (a narrow of a wider index) read in place
//   scale:     every score's factor (PQCache's 1 / sqrt(d) before its softmax): the bits of
//              ATen's scores * scale
//   returns:   [H, g, n]    fp32 (kvb::pq_scores_kernel's shapes)
// Supported when centroids are fp32 CUDA [H, m, K, s] with K <= 256 and m*K <= 12288 (one
// query head's lookup table [m, K] in 48 KiB of shared memory; more query heads than fit are
// split over several launches).
bool pq_scores_supported(const at::Tensor& centroids);
at::Tensor pq_scores(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                     double scale = 1.0);

// PQCache's selection of a decode step in one launch (engine/kernel_adapter.h pq_top_k has the
// semantics, kvbench_cuda.h pq_top_k the kernel).
//   q, centroids, codes: as pq_scores takes them (codes < K, not checked); 0 <= k <= n
//   returns: [H, lead + k + trailing] int64, ascending
//   slices:  kAutoSlices (kvbench_cuda.h pq_top_k_auto_slices) or 1 to 64 (the same entries
//            every way)
// Supported when centroids are fp32 CUDA [H, m, K, s] with 1 <= K <= 256, K^m <= 4096 and the
// tables of q's g query heads fit the kernel's shared memory (pq_top_k_shared_bytes).
constexpr int64_t kAutoSlices = -1;
bool pq_top_k_supported(const at::Tensor& q, const at::Tensor& centroids);
at::Tensor pq_top_k(const at::Tensor& q, const at::Tensor& centroids, const at::Tensor& codes,
                    double scale, int64_t k, int64_t lead, int64_t trailing,
                    int64_t slices = kAutoSlices);

// PQCache's codes of keys in a pool, written in place (engine/kernel_adapter.h pq_encode_rows
// has the semantics; kvbench_cuda.h pq_encode the kernel): one launch.
//   centroids: [H, m, K, s] fp32 contiguous, K <= 256
//   k_pool:    [pool rows, m*s] contiguous, f32, bf16 or f16
//   rows:      [H, n] int64 pool rows, unit stride along n (a block table's columns, in place)
//   codes:     [H, m, >= column + n] uint8, unit stride along the last dimension
// Supported when all are such CUDA tensors on one device.
bool pq_encode_supported(const at::Tensor& centroids, const at::Tensor& k_pool,
                         const at::Tensor& rows, const at::Tensor& codes);
void pq_encode(const at::Tensor& centroids, const at::Tensor& k_pool, const at::Tensor& rows,
               at::Tensor& codes, int64_t column);

// ---- ClusterKV (https://arxiv.org/abs/2412.03213) --------------------------------------------
// Centroid update: out[h, c] = mean of keys[h, j] over labels[h, j] == c; old[h, c] where the
// cluster is empty (clusterkv.cpp cluster_means).
//   keys:   [H, n, d] any floating dtype (converted to fp32)
//   labels: [H, n]    any integer dtype (converted to int32), values in [0, C)
//   old:    [H, C, d] any floating dtype (converted to fp32)
//   returns [H, C, d] fp32; when `counts` is non-null it receives the cluster sizes [H, C] int32.
at::Tensor centroid_update(const at::Tensor& keys, const at::Tensor& labels, const at::Tensor& old,
                           at::Tensor* counts = nullptr);
// Cosine assignment on tensor cores (kvbench_cuda.h cosine_assign): labels [H, n] int64 of
// keys [H, n, d] bf16 / f16 against centroids [H, C, d] L2-normalised by the caller (the
// adapter's normalised_centroids, shared with its ATen path), read in the keys' dtype.
// Supported: keys on a GPU, 16-bit, d a multiple of 16 up to 128, H <= 65535, centroids on the
// keys' device.
bool cosine_assign_supported(const at::Tensor& keys, const at::Tensor& centroids);
at::Tensor cosine_assign(const at::Tensor& keys, const at::Tensor& centroids);

// ClusterKV's rows of a decode step (engine/kernel_adapter.h cluster_rows has the semantics;
// kvbench_cuda.h cluster_rows the kernel).
//   scores:  [H, C] fp32 cluster scores
//   sizes, starts: [H, C] int32 by cluster id (ClusterMetadata::sizes, ::starts)
//   members: [H, N] int32 entry ids grouped by cluster (ClusterMetadata::sorted_indices)
//   last_selected: [H, >= n] int64 (the cache's step table) and hits (an int64 scalar the
//            step's hits are added to), or both undefined (no cache accounting)
//   returns  [H, sinks + taken + n - recent_begin] int64, ascending
// Supported when every input is such a contiguous tensor on one CUDA device and a block's
// shared memory holds C counts and a bitmap of n entries.
bool cluster_rows_supported(const at::Tensor& scores, const at::Tensor& sizes,
                            const at::Tensor& starts, const at::Tensor& members, int64_t n);
at::Tensor cluster_rows(const at::Tensor& scores, const at::Tensor& sizes, const at::Tensor& starts,
                        const at::Tensor& members, int64_t taken, int64_t sinks,
                        int64_t recent_begin, int64_t n, const at::Tensor& last_selected,
                        int64_t step, int64_t oldest_hit, const at::Tensor& hits);

}  // namespace kvb::cuda
