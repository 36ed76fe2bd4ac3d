// CUDA kernels: decode attention, the retrieval family's scoring and selection, the dense
// step's norms, RoPE and K/V writes, raw device pointers (built with nvcc only when
// -DKVBENCH_CUDA=ON, into the static library kvbench_cuda). Each has the same semantics as the
// CPU kernel of the same name and is tested against kernels/reference/reference.h or ATen
// (tests/kernels/cuda/, label "gpu", skipped where no GPU exists); top_pages and cluster_rows,
// which have no CPU kernel, against the kernel adapter's ATen paths
// (tests/gpu/device_parity_test.cpp).
// All pointers are device pointers; calls are asynchronous on `stream` (0: default stream).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_element.h"

namespace kvb::cuda {

// Number of usable CUDA devices; 0 (never an error) without a driver or a GPU.
int device_count();

// Throws std::runtime_error naming `what` and CUDA's message when the last kernel launch of
// this thread failed (too much shared memory, a bad grid, no kernel image for this GPU's
// architecture: see CMAKE_CUDA_ARCHITECTURES). Launch errors only: errors inside a running
// kernel surface at the next synchronisation.
void check_launch(const char* what);

// ClusterKV (https://arxiv.org/abs/2412.03213, Section 4 "GPU kernels").
// Centroid update: one thread block per head; threads stride over the head's keys and add
// them into shared-memory sums [C, d] and counts [C] (atomics in shared memory), then write
// means (old centroid when a cluster is empty). Shared memory: C * (d + 1) * 4 bytes, so
// C * (d + 1) <= 12288 with the 48 KiB default; larger C falls back to global-memory atomics.
void centroid_update(const float* keys, const int32_t* labels, const float* old, float* out,
                     int64_t H, int64_t n, int64_t C, int64_t d, int32_t* counts,
                     void* stream = nullptr);
// Cosine assignment of K-means (ClusterKV's clustering with `kmeans_dtype: keys`) on tensor
// cores: labels[h, j] = the c of largest keys[h, j] . centroids[h, c], each product summed in
// fp32 and rounded to the keys' type before the comparison, as ATen's bmm in that type writes
// it and its argmax ranks it (ties: the lowest id; the first NaN above all). keys [H, n, d] and
// centroids [H, C, d] (L2-normalised by the caller) contiguous, bf16 or f16 (`type`), 16-byte
// aligned; labels [H, n] int64. cosine_assign_supported: d a multiple of 16 up to 128, n and C
// at most 2^31 - 129.
bool cosine_assign_supported(int64_t n, int64_t d, int64_t C);
void cosine_assign(const void* keys, const void* centroids, kernels::KvElement type,
                   int64_t* labels, int64_t H, int64_t n, int64_t C, int64_t d,
                   void* stream = nullptr);
// A decode step's rows (kernels/cuda/cluster_rows.cu), per head h of H, ascending into out
// [H, sinks + taken + n - recent_begin] int64: the entries 0 .. sinks - 1; the first `taken`
// members of the clusters in the order of a stable descending sort of scores [H, C] fp32 (the
// last one cut to its first members), cluster c holding sizes[h, c] members from
// members[h, starts[h, c]] on (sizes, starts [H, C], members [H, N] int32, rows contiguous;
// the sizes sum to N); the entries recent_begin .. n - 1. Every member lies in
// sinks .. recent_begin - 1, each once. With last_selected ([H, W] int64, W >= n): for each
// taken member e, last_selected[h, e] >= oldest_hit counts a hit (summed into *hits), and
// last_selected[h, e] becomes `step`. A block per head; needs cluster_rows_fit(C, n).
void cluster_rows(const float* scores, const int32_t* sizes, const int32_t* starts,
                  const int32_t* members, int64_t H, int64_t C, int64_t N, int64_t taken,
                  int64_t sinks, int64_t recent_begin, int64_t n, int64_t* last_selected,
                  int64_t W, int64_t step, int64_t oldest_hit, int64_t* hits, int64_t* out,
                  void* stream = nullptr);
// Whether a block's shared memory holds C clusters' counts and a bitmap of n entries (4 bytes
// each per cluster and per 32 entries: about 1.8 million entries on an H100).
bool cluster_rows_fit(int64_t clusters, int64_t n);

// Quest's page summaries after a decode step's key k [H, d] (Quest's on_append), one launch
// where ATen's minimum and maximum (or two copies) made two: kmin/kmax[h, page, :] (heads
// head_stride elements apart) widened to k's values (the minimum and maximum as ATen's, a NaN
// winning), or both set to k when `fresh` (a new page). k and the summaries of one `type`.
void quest_fold_key(void* kmin, void* kmax, kernels::KvElement type, const void* k, int64_t H,
                    int64_t d, int64_t head_stride, int64_t page, bool fresh,
                    void* stream = nullptr);

// Quest page scoring (https://arxiv.org/abs/2406.10774): q [H, g, d] of `q_type` (widened to
// fp32), kmin/kmax [H, P, d] of `summary_type` (heads head_stride elements apart), scores
// [H, g, P] or [H, P] when sum_group, fp32. 16-byte loads, a lane group per page, where a
// page's row is 2 to 32 such vectors and 16-byte aligned; else a warp per page.
// With `fold`, the decode step's key is folded into page fold->page first, as
// quest_fold_key folds it (kmin/kmax are written there): head h's key is row
// fold->rows[h * fold->rows_stride] of the pool fold->pool ([rows, d] of `summary_type`), read
// in place. On the vector path in the same launch, the page's lane group folding the key as it
// scores the page; else one launch of the fold first.
struct QuestFold {
  const void* pool;
  const int64_t* rows;
  int64_t rows_stride;
  int64_t page;
  bool fresh;
};
void quest_page_scores(const void* q, kernels::KvElement q_type, void* kmin, void* kmax,
                       kernels::KvElement summary_type, float* scores, int64_t H, int64_t g,
                       int64_t P, int64_t d, int64_t head_stride, bool sum_group,
                       void* stream = nullptr, const QuestFold* fold = nullptr);

// The entries of each row's best pages (kernels/cuda/top_pages.cu; Quest's selection, and with
// page_size 1 PQCache's top-k): for each of `rows` rows of page scores (fp32, rows `stride`
// floats apart), the pages 0..pages-1 in the order of a stable descending sort of their
// scores (ties to the lower page); the first `whole` of them give all their page_size
// entries, the next one its first `part` (0 <= part < page_size), then the trailing entries
// pages * page_size .. n - 1 (Quest's current page, PQCache's window); every entry shifted by
// `lead`, after the leading entries 0 .. lead - 1 (PQCache's sinks). out [rows, lead +
// whole * page_size + part + n - pages * page_size] int64: each row's entries, ascending.
// Needs whole + (part > 0) <= pages and pages * page_size <= n.
// chunk 0: a block per row. chunk >= 1: two launches; first a block per `chunk` pages of a
// row keeps that chunk's best whole + (part > 0) pages (the row's best are among them), into
// candidate_scores / candidate_pages [rows, top_pages_candidates(...)]; then a block per row
// ranks the candidates. The same entries either way; a single block per row walks a long row
// alone on an otherwise idle GPU (8 blocks for PQCache's 8 KV heads).
// limit (a device int64, read there; needs page_size 1, part 0 and trailing entries): a row
// takes only its best min(whole, *limit - trailing) pages, then the trailing entries, then
// repeats the last one up to the width (InfiniGen's fetch, counted on the device).
void top_pages(const float* scores, int64_t stride, int64_t* out, int64_t rows, int64_t pages,
               int64_t whole, int64_t part, int64_t page_size, int64_t n, int64_t lead,
               int64_t chunk = 0, float* candidate_scores = nullptr,
               int32_t* candidate_pages = nullptr, void* stream = nullptr,
               const int64_t* limit = nullptr);

// How many candidates a row keeps in chunks of `chunk` pages when `taken` pages are taken:
// min(taken, chunk) from every chunk but the last, which keeps min(taken, its pages).
inline int64_t top_pages_candidates(int64_t pages, int64_t taken, int64_t chunk) {
  const int64_t last = pages - (pages - 1) / chunk * chunk;  // pages in the last chunk
  return (pages - 1) / chunk * (taken < chunk ? taken : chunk) + (taken < last ? taken : last);
}

// The chunk the LibTorch glue uses: chunks of 4096 pages, 8192 from 64 Ki pages, where they
// keep at most a quarter of the pages and the row holds at least 4 of them; else 0, one block
// per row. Measured by `gpu_topk_chunk` (the top 496 of 8 rows, H100, 2026-11-27, device
// time): at 32k pages 47.9 us in one block a row, 30.9 / 30.8 / 37.8 us in chunks of 2048 /
// 4096 / 8192; at 128k 165.0, 75.0 / 48.4 / 40.7 us. The fastest chunks fill about one wave
// of the 132 SMs (8 rows x 16 chunks); between the two sizes the switch is not measured.
inline int64_t top_pages_auto_chunk(int64_t pages, int64_t taken) {
  const int64_t chunk = pages >= 16 * 4096 ? 8192 : 4096;
  return taken >= 1 && 4 * taken <= chunk && pages >= 4 * chunk ? chunk : 0;
}

// PQCache scoring (https://arxiv.org/abs/2407.12820): q [H, g, m*s] of `q_type` (widened),
// centroids [H, m, K, s] fp32, codes [H, m, n] uint8 with rows codes_row >= n apart, scores
// [H, g, n], each times `scale` (one rounding, as a multiplication after the kernel would).
// One block per (head, 2048 tokens); the lookup table [g, m, K] is built in shared memory,
// from q and the head's centroids copied there first where they fit the default 48 KiB
// (PQCache's defaults on Llama's d = 128: 37 KiB).
void pq_scores(const void* q, kernels::KvElement q_type, const float* centroids,
               const uint8_t* codes, float* scores, int64_t H, int64_t g, int64_t m, int64_t K,
               int64_t s, int64_t n, int64_t codes_row, float scale = 1.f,
               void* stream = nullptr);

// PQCache's selection of a decode step (kernels/pq_scoring.h pq_top_k has the semantics; its CPU
// kernel computes the same weights in another summation order): per KV head h, out[h] [lead +
// k + trailing] int64 = 0 .. lead - 1, lead + the k tokens of largest weight (the softmax of
// scale * q . centroid over the n tokens per query head, summed over the g query heads) in
// index order, lead + n .. lead + n + trailing - 1. q [H, g, m*s] of `q_type`, centroids [H, m,
// K, s] fp32, codes [H, m, n] uint8 rows codes_row apart, values < K (not checked).
// slices 1: a block per KV head counts the tokens of each code combination, ranks the
// combinations and writes the row, one launch. slices > 1: two launches, the first a block per
// (slice, head) counting a slice's tokens into partial [H, slices, K^m] int32, the second a
// block per (slice, head) ranking the combinations from the summed counts and writing that
// slice's tokens at the offsets the earlier slices' counts give (the same entries either way;
// one block per head walks a long row alone on 8 of the GPU's SMs).
// Needs 1 <= K <= 256, K^m <= kernels::kPqMaxCombinations, pq_top_k_shared_bytes(g, m, K) <=
// kPqTopKSharedBytes, 0 <= k <= n < 2^31 - 2^13, H <= 65535, 1 <= slices <= kPqTopKMaxSlices.
// Of the 48 KiB a kernel gets without opting in, static arrays included: pq_select_kernel's
// own are 2320 bytes (`nvcc --resource-usage`, sm_80/sm_90: the radix select's histograms and
// its warps' totals), so its tables may take 45 KiB (with 46, tables of 46833-47104 bytes
// passed the check and could not launch).
constexpr size_t kPqTopKSharedBytes = 45 * 1024;
constexpr int64_t kPqTopKMaxSlices = 64;
size_t pq_top_k_shared_bytes(int64_t g, int64_t m, int64_t K);
void pq_top_k(const void* q, kernels::KvElement q_type, const float* centroids,
              const uint8_t* codes, int64_t H, int64_t g, int64_t m, int64_t K, int64_t s,
              int64_t n, int64_t codes_row, float scale, int64_t k, int64_t lead,
              int64_t trailing, int64_t* out, int64_t slices = 1, int32_t* partial = nullptr,
              void* stream = nullptr);

// The slices the LibTorch glue uses: one per 4096 tokens, 1 to 16 (8 KV heads x 16 = 128
// blocks of 1024 threads, about one per SM of an H100; 32 made two waves). The fastest that
// `gpu_pq_select_slices` tried on an H100 (2026-11-27): at 32k 8 slices, 79.9 us (one slice
// 95.2, 4 81.6, 16 83.0); at 128k 16, 85.7 us (8 91.0, 32 154). One below 64k tokens before.
inline int64_t pq_top_k_auto_slices(int64_t n) {
  const int64_t slices = n / 4096;
  return slices < 1 ? 1 : (slices > 16 ? 16 : slices);
}

// PQCache's codes of keys read in place from a pool (https://arxiv.org/abs/2407.12820, tokens
// leaving the local window): codes[h * codes_head + u * codes_row + column + j] = the id of the
// centroid [H, m, K, s] (fp32) nearest, by squared distance in fp32, to sub-vector u of the key
// at pool row rows[h * rows_stride + j] (pool [rows, m * s] of `type`); ties to the lower id,
// NaN first, as ATen's argmin. K <= 256 (uint8 codes). A block per (token, sub-space, head), a
// thread per centroid: one launch for a decode step's new keys.
void pq_encode(const void* k_pool, kernels::KvElement type, const int64_t* rows,
               int64_t rows_stride, const float* centroids, uint8_t* codes, int64_t codes_head,
               int64_t codes_row, int64_t column, int64_t H, int64_t n, int64_t m, int64_t K,
               int64_t s, void* stream = nullptr);

// Llama's RMSNorm of each row as the CPU kernel computes it (kernels/rms_norm.h), but for the
// squares' sum, in fp32 here: r = 1 / sqrt(sum / dim + eps), out = round(round(x * r) * w) in
// `type`.
// x, out: [rows, dim] (out distinct from x and weight), weight: [dim], all of `type`. One block
// per row.
void rms_norm(const void* x, const void* weight, void* out, kernels::KvElement type,
              int64_t rows, int64_t dim, float eps, void* stream = nullptr);
// The residual add before it in the same launch: sum = round(x + residual) in `type` (ATen's
// add), out = rms_norm(sum) (kernels/rms_norm.h add_rms_norm). sum and out distinct from each
// other and from the inputs.
void add_rms_norm(const void* x, const void* residual, const void* weight, void* sum, void* out,
                  kernels::KvElement type, int64_t rows, int64_t dim, float eps,
                  void* stream = nullptr);

// Rotary embedding with rotate-half pairs, the CPU kernel's semantics and bits
// (kernels/rope.h): x, out: [n, L, d] (not overlapping), cos, sin: [L, r], all of `type`;
// r even, 0 < r <= d. One block per (head, position).
void rope_rotate_half(const void* x, const void* cos, const void* sin, void* out,
                      kernels::KvElement type, int64_t n, int64_t L, int64_t d, int64_t r,
                      void* stream = nullptr);

// New K and V rows into their pools, as the CPU kernel (kernels/kv_rows.h): k_pool[r_i] =
// k[i], v_pool[r_i] = v[i] with r_i = rows[i * rows_stride] distinct, rows of row_bytes bytes.
// One launch.
void write_kv_rows(void* k_pool, void* v_pool, const int64_t* rows, int64_t rows_stride,
                   const void* k, const void* v, int64_t n, int64_t row_bytes,
                   void* stream = nullptr);

// ---- Paged sparse GQA decode attention (flash-decoding) ------------------------------------
// Whether the kernel takes g query heads per unit and head dim d: g <= 8, d <= 256.
bool decode_attention_supported(int64_t g, int64_t d);
// Which kernel runs a call's first pass. kTensorCores (the default): q k^T and p v as
// tensor-core products (mma.m16n8k16, sm_80 or later) where the call is Llama's shape in 16
// bits: bf16 or fp16 K/V with d = 128, q of the same type; p is rounded to that type before
// p v, as FlashAttention rounds it; elsewhere the CUDA-core kernel. kCudaCores: the CUDA-core
// kernel always (fp32 products of the widened values). On an H200 (2026-11-30, gpu_bench's
// gpu_decode_kernel) the tensor cores' read every row of Llama-3-8B's layer at 32k / 128k in
// 44.4 / 135.1 us, the CUDA cores' in 63.3 / 207.7, SDPA in 40.7 / 129.4.
enum class DecodeKernel { kTensorCores, kCudaCores };
// Whether a call with these types, pools, d and kernel runs on the tensor cores.
bool decode_attention_on_tensor_cores(kernels::KvElement q_type, kernels::KvElement type,
                                      const void* k_pool, const void* v_pool, int64_t d,
                                      DecodeKernel kernel = DecodeKernel::kTensorCores);
// How many splits of the row lists to run for `units` units whose longest list has `longest`
// rows (an upper bound will do: each unit divides its own rows), for the kernel a call with
// this q type, these pools, element type, g, d and kernel runs: as many blocks as stay
// resident on the GPU at once (one wave), none of fewer than 64 rows. The GPU's SM count and
// each kernel's resident blocks are asked once per process, on the device of the first call
// (GPUs of one model assumed).
int64_t decode_attention_splits(kernels::KvElement q_type, kernels::KvElement type,
                                const void* k_pool, const void* v_pool, int64_t units, int64_t g,
                                int64_t d, int64_t longest,
                                DecodeKernel kernel = DecodeKernel::kTensorCores);
// Floats of workspace a call with these sizes needs.
int64_t decode_attention_workspace_floats(int64_t units, int64_t g, int64_t d, int64_t splits);
// out[u*g + i] = softmax(scale * q[u*g + i] . K_u) V_u over the rows unit u attends, read in
// place from the pools (no gathered copy), fp32 accumulation (`kernel`: how, above):
//   q:       [units * g, d] of `q_type` (a unit's g query heads share its rows: GQA), widened
//            to fp32 as read on the CUDA cores; on the tensor cores taken as it is (16 bits,
//            the pools' type) into the products, scale applied to q . k in fp32
//   k_pool, v_pool: [pool rows, d] of `type`, rows d elements apart
//   indptr:  [units + 1] int64: unit u attends n_u = indptr[u + 1] - indptr[u] pool rows
//            (ragged; an empty unit gives zeros), listed in
//   rows:    int64: row_list_stride 0: [indptr[units]], unit u's at rows[indptr[u] ..);
//            row_list_stride > 0: unit u's at rows[u * row_list_stride ..) (a row of a wider
//            table, read in place)
//   out:     [units * g, d] of `q_type`, rounded to nearest even from the fp32 result
//   probs:   null, or [g * indptr[units]] fp32: unit u's softmax probabilities [g, n_u] at
//            g * indptr[u] (as kernels/decode_attention.h lays them out)
//   workspace: decode_attention_workspace_floats(units, g, d, splits) floats
// Two launches (the splits, then their log-sum-exp merge); std::invalid_argument when
// !decode_attention_supported(g, d).
void sparse_decode_attention(const void* q, kernels::KvElement q_type, const void* k_pool,
                             const void* v_pool, kernels::KvElement type, const int64_t* indptr,
                             const int64_t* rows, int64_t row_list_stride, void* out,
                             float* probs, int64_t units, int64_t g, int64_t d, float scale,
                             int64_t splits, float* workspace, void* stream = nullptr,
                             DecodeKernel kernel = DecodeKernel::kTensorCores);

}  // namespace kvb::cuda
