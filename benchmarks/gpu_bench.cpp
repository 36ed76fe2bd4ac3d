// GPU kernel benchmarks (issue 21), built into kvbench_bench on a CUDA build
// (KVBENCH_CUDA_KERNELS); timed with CUDA events around each call, after one untimed call (a
// first call loads kernels: SDPA's took about 0.7 s on an H200, a whole repetition of 0.2 s).
// Llama-3-8B attention shape: 32 query heads, 8 KV heads of 128, bf16 K/V.
//   gpu_copy/<MiB>                  device-to-device copy: the ceiling (read + write counted)
//   gpu_decode_all/<n>              kvbench's paged decode kernel over every row of n tokens
//   gpu_decode_sparse/<n>/<B>       the same over B rows per KV head (random 16-row pages)
//   gpu_decode_splits/<n>/<splits>  the kernel over every row with a given number of splits
//                                   (the raw kernel, not the glue's choice; counter `chosen`:
//                                   the count decode_attention_splits picks, one full wave)
//   gpu_decode_kernel/<n>/<kernel>  the same in its one-wave count on the tensor cores (0: the
//                                   default) or the CUDA cores (1; kvbench_cuda.h DecodeKernel)
//   gpu_sdpa/<n>                    ATen's scaled_dot_product_attention on the same shapes: one
//                                   decode query per head, 32 over 8 KV heads (enable_gqa, so
//                                   K/V are read unrepeated; PyTorch >= 2.5)
//   gpu_quest_scores/<n>            Quest's page scores over n / 16 pages, bf16 summaries (as
//                                   Quest keeps them on a GPU), the group's scores summed
//   gpu_pq_scores/<n>               PQCache's table scores over n tokens (m = 2, b = 6: its
//                                   defaults), 4 query heads per KV head
//   gpu_pq_select/<n>/<composition> PQCache's whole selection of one layer (8 KV heads, bf16 q,
//                                   top 496 between 32 sinks and a 497-entry window): the
//                                   kernel by code combination (0, pq_top_k: two launches
//                                   over slices of 4096 tokens from 8k tokens), or the
//                                   composition it replaced (1: the scores kernel, ATen's
//                                   softmax and sum, top_k_ascending)
//   gpu_pq_select_slices/<n>/<s>    the same kernel in one launch (s = 1) or two over s slices
//                                   of each row (counter `chosen`: the glue's count,
//                                   kvbench_cuda.h pq_top_k_auto_slices)
//   gpu_quest_select/<pages>/<aten> Quest's selection from the page scores of 8 KV heads: the
//                                   entries of the best 63 pages and the current one (B = 1024):
//                                   the kernel (0, top_page_entries), or ATen's stable sort,
//                                   assembly and sort of the entries (1)
//   gpu_quest_select_chunk/<pages>/<chunk>
//                                   the same on the kernel in one launch (0) or two, the first
//                                   over chunks of `chunk` pages (counter chosen: the glue's)
//   gpu_topk/<n>/<aten>             PQCache's rows at B = 1024 from [8, n] scores: 32 sinks,
//                                   the top 496 in index order, a window of 496: the kernel
//                                   (0, top_k_ascending: one launch or two, as the glue
//                                   chooses), or ATen's topk, a sort and the ranges'
//                                   concatenation (1)
//   gpu_topk_chunk/<n>/<chunk>      the same top-k on the kernel in one launch (chunk 0) or in
//                                   two, the first over chunks of `chunk` scores (the glue's
//                                   choice: kvbench_cuda.h top_pages_auto_chunk)
//   gpu_cluster_rows/<n>            ClusterKV's rows of a decode step for 8 KV heads at B = 1024
//                                   (n / 80 clusters of random sizes, 16 sinks, 64 recent
//                                   entries): cluster_rows_kernel, one block a head
//   gpu_cosine_assign/<n>           ClusterKV's assignment of n fp32 keys per KV head to n / 80
//                                   centroids (the paper's C0): ATen's bmm and argmax
//   gpu_cosine_assign_bf16/<n>      the same assignment of the keys in bf16, products in bf16
//                                   (ClusterKV's kmeans_dtype: keys): since 2026-11-29 the
//                                   tensor-core kernel with the argmax fused (kvbench_cuda.h
//                                   cosine_assign); ATen's bf16 bmm and argmax, as before:
//                                   gpu_cosine_assign_block/<n>/26/1 (24 before 2026-11-30)
//   gpu_cosine_assign_block/<n>/<log2 block>/<bf16>
//                                   the same assignments (bf16: 1) in chunks of keys whose
//                                   similarities hold at most 2^block elements (26: the
//                                   default, kAssignBlockElements, since 2026-11-30; 24 and
//                                   28: 4 times more and fewer chunks); counter chunks
//   gpu_centroid_update/<n>         the mean update of the same clusters (the kernel)
//   gpu_kmeans/<n>                  a whole prefill clustering of one layer (cosine_kmeans, at
//                                   most 20 Lloyd steps, ClusterKV's default); counter steps
//   gpu_kmeans_keys_dtype/<n>       the same from bf16 keys, products in bf16
//   gpu_pq_encode/<aten>            PQCache's codes of one decode step's key per KV head (m = 2,
//                                   b = 6) from a bf16 pool at 32k: the kernel (0) or ATen (1)
//   gpu_prefill_attention/<n>/<kernel>
//                                   one layer's causal prefill attention over n tokens, as a
//                                   prefill runs it (engine/prefill_attention.h
//                                   fused_causal_attention: K/V repeated to 32 heads, bf16),
//                                   under ATen's choice (0) or only its flash (1),
//                                   memory-efficient (2) or cuDNN (3) kernel enabled (skipped
//                                   where that one refuses the call); counters TFLOPs (QK^T and
//                                   PV, 4 Hq n^2 d FLOPs, halved by the causal mask) and
//                                   `choice` (ATen's pick, SDPBackend's number: 1 flash, 2
//                                   memory-efficient, 3 cuDNN).
//                                   Why: Full's prefill of the 8B shape took 3.8-4.0 s at 32k
//                                   and 49 s at 128k on the H100, about 3x what its FLOPs need
// Times: the device's, each call queued behind a held stream before its first kernel runs
// (time_with_events; counter held = 1, or 0 for an op that waits for the device inside, timed
// as called), so launch costs on the host are not counted; counter with_host_us: the median
// call's time as called, the host's launches included.
// Counters: bytes moved per call and TBps (bytes / time, decimal).
// Run: kvbench_bench --benchmark_filter='gpu_'
#if KVBENCH_CUDA_KERNELS
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <benchmark/benchmark.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernel_adapter.h"
#include "engine/prefill_attention.h"
#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/cuda/torch_glue.h"
#include "methods/retrieval/clusterkv.h"

namespace kvb {
namespace {

constexpr int64_t kHq = 32, kHkv = 8, kD = 128;
const at::Device kGpu(at::kCUDA, 0);

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes"] = bytes;
  state.counters["TBps"] =
      benchmark::Counter(bytes * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

// A stream held by a host function until the bench releases it, so that a call's launches all
// queue before its first kernel runs and the events between them time the device's work alone
// (the host's launch costs, 9-17 us a call on the H100's host, 2026-11-27, are not the
// kernel's). An op that waits for the device inside would wait for ever: the hold gives up
// after kHoldLimit and says so, and that op is timed unheld.
constexpr auto kHoldLimit = std::chrono::milliseconds(200);
struct StreamHold {
  std::atomic<bool> released{false};
  std::atomic<bool> gave_up{false};
};
void CUDART_CB hold_until_released(void* hold) {
  auto* h = static_cast<StreamHold*>(hold);
  const auto limit = std::chrono::steady_clock::now() + kHoldLimit;
  while (!h->released.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > limit) {
      h->gave_up.store(true);
      return;
    }
  }
}

// One call of `op` between two CUDA events on the current stream, held (above) or not: its
// time in seconds, or a negative number where the hold gave up (op waited for the device).
double timed_call(const std::function<void()>& op, bool held, at::cuda::CUDAEvent& start,
                  at::cuda::CUDAEvent& stop) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  StreamHold hold;  // outlives the host function: stop.synchronize() below waits for it
  if (held) C10_CUDA_CHECK(cudaLaunchHostFunc(stream.stream(), hold_until_released, &hold));
  start.record(stream);
  op();
  stop.record(stream);
  hold.released.store(true, std::memory_order_release);
  stop.synchronize();
  return hold.gave_up.load() ? -1.0 : double(start.elapsed_time(stop)) * 1e-3;
}

// Times each call of `op` between two CUDA events after one untimed call: the device's time,
// the stream held while the host queues the call (counter held = 1), or, for an op that waits
// for the device inside, the call unheld (held = 0). Counter with_host_us: the median of 5
// unheld calls, the host's launches included (what a caller that waits for each call sees).
void time_with_events(benchmark::State& state, const std::function<void()>& op) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  op();
  at::cuda::getCurrentCUDAStream().synchronize();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  std::vector<double> unheld;
  for (int i = 0; i < 5; ++i) unheld.push_back(timed_call(op, false, start, stop));
  std::nth_element(unheld.begin(), unheld.begin() + 2, unheld.end());
  const bool held = timed_call(op, true, start, stop) >= 0;
  for (auto _ : state) {
    const double seconds = timed_call(op, held, start, stop);
    if (seconds < 0) {  // held, yet it waited for the device this time: no time to report
      state.SkipWithError("the held stream gave up: the op waited for the device");
      break;
    }
    state.SetIterationTime(seconds);
  }
  state.counters["held"] = held ? 1 : 0;
  state.counters["with_host_us"] = unheld[2] * 1e6;
}

void BM_gpu_copy(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t bytes = int64_t(state.range(0)) << 20;
  at::Tensor src = at::ones({bytes}, at::TensorOptions(kGpu).dtype(at::kByte));
  at::Tensor dst = at::empty_like(src);
  time_with_events(state, [&] { dst.copy_(src); });
  set_bytes(state, 2.0 * double(bytes));
}
BENCHMARK(BM_gpu_copy)->Arg(1024)->UseManualTime()->Unit(benchmark::kMicrosecond);

// A bf16 pool of n tokens per KV head (heads' rows interleaved by 16-row blocks, as LayerKV
// allocates them) and a query.
struct Pool {
  at::Tensor q, k, v;  // [Hq, d], [Hkv * n, d] x2
};

Pool make_pool(int64_t n) {
  const auto bf16 = at::TensorOptions(kGpu).dtype(at::kBFloat16);
  return {at::randn({kHq, kD}, bf16), at::randn({kHkv * n, kD}, bf16),
          at::randn({kHkv * n, kD}, bf16)};
}

// Pool rows of `pages` random 16-row pages per KV head (all pages when pages = n / 16).
std::pair<at::Tensor, at::Tensor> pages_of_heads(int64_t n, int64_t pages) {
  std::vector<int64_t> indptr = {0}, rows;
  at::manual_seed(7);
  for (int64_t h = 0; h < kHkv; ++h) {
    at::Tensor chosen = std::get<0>(at::randperm(n / 16, at::kLong).narrow(0, 0, pages).sort());
    for (int64_t i = 0; i < pages; ++i)
      for (int64_t r = 0; r < 16; ++r)
        rows.push_back((chosen[i].item<int64_t>() * kHkv + h) * 16 + r);
    indptr.push_back(int64_t(rows.size()));
  }
  return {at::tensor(indptr).to(kGpu), at::tensor(rows).to(kGpu)};
}

// Bytes a decode call over `rows_per_head` rows of each KV head moves: their K and V rows
// (bf16) and int64 row ids, q read and the result written (bf16).
double decode_bytes(int64_t rows_per_head) {
  return double(kHkv * rows_per_head) * (2 * kD * 2 + 8) + 2.0 * kHq * kD * 2;
}

void decode(benchmark::State& state, int64_t n, int64_t rows_per_head) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Pool pool = make_pool(n);
  const std::pair<at::Tensor, at::Tensor> selection = pages_of_heads(n, rows_per_head / 16);
  const at::Tensor& indptr = selection.first;  // [Hkv + 1]
  const at::Tensor& rows = selection.second;   // [Hkv * rows_per_head]
  const double scale = 1.0 / std::sqrt(double(kD));
  time_with_events(state, [&] {
    cuda::sparse_decode_attention(pool.q, pool.k, pool.v, indptr, rows, scale, rows_per_head);
  });
  set_bytes(state, decode_bytes(rows_per_head));
}

void BM_gpu_decode_all(benchmark::State& state) { decode(state, state.range(0), state.range(0)); }
BENCHMARK(BM_gpu_decode_all)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_decode_sparse(benchmark::State& state) {
  decode(state, state.range(0), state.range(1));
}
BENCHMARK(BM_gpu_decode_sparse)->Args({32768, 1024})->Args({131072, 1024})->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The raw kernel (not the glue) over every row of n tokens in `splits` splits (0: the count
// decode_attention_splits picks for `kernel`, one full wave; counter `chosen`: that count).
void raw_decode(benchmark::State& state, int64_t n, int64_t splits, cuda::DecodeKernel kernel) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t g = kHq / kHkv;
  const Pool pool = make_pool(n);
  const std::pair<at::Tensor, at::Tensor> selection = pages_of_heads(n, n / 16);
  const at::Tensor& indptr = selection.first;  // [Hkv + 1]
  const at::Tensor& rows = selection.second;   // [Hkv * n]
  at::Tensor out = at::empty_like(pool.q);     // [Hq, d]
  const auto bf16 = kernels::KvElement::kBF16;
  const int64_t chosen = cuda::decode_attention_splits(bf16, bf16, pool.k.data_ptr(),
                                                       pool.v.data_ptr(), kHkv, g, kD, n, kernel);
  if (splits == 0) splits = chosen;
  at::Tensor workspace =
      at::empty({cuda::decode_attention_workspace_floats(kHkv, g, kD, splits)},
                pool.q.options().dtype(at::kFloat));
  time_with_events(state, [&] {
    cuda::sparse_decode_attention(pool.q.data_ptr(), bf16, pool.k.data_ptr(), pool.v.data_ptr(),
                                  bf16, indptr.data_ptr<int64_t>(), rows.data_ptr<int64_t>(),
                                  /*row_list_stride=*/0, out.data_ptr(), /*probs=*/nullptr, kHkv,
                                  g, kD, float(1.0 / std::sqrt(double(kD))), splits,
                                  workspace.data_ptr<float>(),
                                  at::cuda::getCurrentCUDAStream().stream(), kernel);
  });
  state.counters["chosen"] = double(chosen);
  set_bytes(state, decode_bytes(n));
}

// Whether the split count the glue picks is the fastest: the same dense call with other counts.
void BM_gpu_decode_splits(benchmark::State& state) {
  raw_decode(state, state.range(0), state.range(1), cuda::DecodeKernel::kTensorCores);
}
BENCHMARK(BM_gpu_decode_splits)
    ->ArgsProduct({{32768}, {16, 33, 49, 66, 99, 132, 264}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The dense call on each pass-1 kernel (0: tensor cores, the default; 1: CUDA cores), each in
// its own one-wave split count.
void BM_gpu_decode_kernel(benchmark::State& state) {
  raw_decode(state, state.range(0), 0,
             state.range(1) ? cuda::DecodeKernel::kCudaCores : cuda::DecodeKernel::kTensorCores);
}
BENCHMARK(BM_gpu_decode_kernel)
    ->ArgsProduct({{32768, 131072}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_quest_scores(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t P = state.range(0) / 16, g = kHq / kHkv;
  const auto bf16 = at::TensorOptions(kGpu).dtype(at::kBFloat16);
  at::Tensor a = at::randn({kHkv, P, kD}, bf16), b = at::randn({kHkv, P, kD}, bf16);
  at::Tensor kmin = at::minimum(a, b), kmax = at::maximum(a, b);  // [Hkv, P, d]
  at::Tensor q = at::randn({kHkv, g, kD}, bf16);
  time_with_events(state, [&] { cuda::quest_page_scores(q, kmin, kmax, /*sum_group=*/true); });
  set_bytes(state, double(2 * kHkv * P * kD) * 2 + double(kHkv * P) * 4);
}
BENCHMARK(BM_gpu_quest_scores)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// PQCache's index of n tokens at its defaults (m = 2, b = 6) on the 8 KV heads, and a decode
// query of 4 heads per KV head in `q_dtype`.
struct PqInputs {
  at::Tensor centroids;  // [Hkv, m, K, s] fp32
  at::Tensor codes;      // [Hkv, m, n] uint8
  at::Tensor q;          // [Hkv, g, d]
};
PqInputs pq_inputs(int64_t n, at::ScalarType q_dtype) {
  constexpr int64_t m = 2, K = 64;
  const auto floats = at::TensorOptions(kGpu).dtype(at::kFloat);
  return {at::randn({kHkv, m, K, kD / m}, floats),
          at::randint(K, {kHkv, m, n}, floats.dtype(at::kByte)),
          at::randn({kHkv, kHq / kHkv, kD}, floats.dtype(q_dtype))};
}

void BM_gpu_pq_scores(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0);
  const PqInputs in = pq_inputs(n, at::kFloat);
  time_with_events(state, [&] { cuda::pq_scores(in.q, in.centroids, in.codes); });
  set_bytes(state, double(in.codes.numel()) + double(kHq * n) * 4);
}
BENCHMARK(BM_gpu_pq_scores)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_pq_select(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const PqInputs in = pq_inputs(state.range(0), at::kBFloat16);
  const double scale = 1.0 / std::sqrt(double(kD));
  if (state.range(1) == 0) {
    time_with_events(state, [&] { pq_top_k(in.q, in.centroids, in.codes, scale, 496, 32, 497); });
  } else {
    time_with_events(state, [&] {
      const at::Tensor weights = at::softmax(pq_scores(in.q, in.centroids, in.codes, scale), -1);
      top_k_ascending(weights.sum(1), 496, 32, 497);
    });
  }
  set_bytes(state, double(2 * in.codes.numel()));  // the codes, read twice by the kernel
}
BENCHMARK(BM_gpu_pq_select)->ArgsProduct({{32768, 131072}, {0, 1}})->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_pq_select_slices(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0), slices = state.range(1);
  const PqInputs in = pq_inputs(n, at::kBFloat16);
  const double scale = 1.0 / std::sqrt(double(kD));
  time_with_events(state, [&] {
    cuda::pq_top_k(in.q, in.centroids, in.codes, scale, 496, 32, 497, slices);
  });
  set_bytes(state, double(2 * in.codes.numel()));
  state.counters["chosen"] = double(cuda::pq_top_k_auto_slices(n));
}
BENCHMARK(BM_gpu_pq_select_slices)->ArgsProduct({{32768, 131072}, {1, 4, 8, 16, 32}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_gpu_quest_select(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t pages = state.range(0);
  const KernelPath path = state.range(1) ? KernelPath::kAten : KernelPath::kAuto;
  // [Hkv, pages + 1]: the current page's score last, as Quest's scores
  at::Tensor scores = at::randn({kHkv, pages + 1}, at::TensorOptions(kGpu).dtype(at::kFloat));
  time_with_events(state, [&] {
    top_page_entries(scores, pages, /*whole=*/63, /*part=*/0, /*page_size=*/16, pages * 16 + 1,
                     path);
  });
  set_bytes(state, double(kHkv * pages) * 4);
}
BENCHMARK(BM_gpu_quest_select)->ArgsProduct({{2048, 8192}, {0, 1}})->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The same selection on the kernel in one launch (chunk 0, the glue's choice at these page
// counts) or two, the first over chunks of `chunk` pages: at 8192 pages one block a row ranks
// them alone, 8 blocks on the GPU (18.5 us on the H100, 2026-11-27).
void BM_gpu_quest_select_chunk(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t pages = state.range(0), chunk = state.range(1);
  at::Tensor scores = at::randn({kHkv, pages + 1}, at::TensorOptions(kGpu).dtype(at::kFloat));
  time_with_events(state, [&] {
    cuda::top_pages(scores, pages, /*whole=*/63, /*part=*/0, /*page_size=*/16, pages * 16 + 1,
                    /*lead=*/0, chunk);
  });
  set_bytes(state, double(kHkv * pages) * 4);
  state.counters["chosen"] = double(cuda::top_pages_auto_chunk(pages, 63));
}
BENCHMARK(BM_gpu_quest_select_chunk)->ArgsProduct({{2048, 8192}, {0, 512, 1024, 2048}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// ClusterKV's rows of one decode step for 8 KV heads at B = 1024 (its defaults: 16 sinks,
// n / 80 clusters; 64 recent entries not yet clustered, so 944 members of the best clusters),
// the clusters' sizes random, the step's cache accounting on: one launch of
// cluster_rows_kernel, 35 us a layer at 32k in the H200's profile (2026-11-30), where issue
// 21's selection share leaves about 25.
void BM_gpu_cluster_rows(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0), sinks = 16, recent = 64, clusters = n / 80;
  const int64_t members_count = n - sinks - recent, taken = 1024 - sinks - recent;
  const auto longs = at::TensorOptions(kGpu).dtype(at::kLong);
  const at::Tensor labels = at::randint(clusters, {kHkv, members_count}, longs);  // [Hkv, N]
  const at::Tensor members = (labels.argsort(int64_t(-1), false) + sinks).to(at::kInt);  // grouped by cluster
  std::vector<at::Tensor> counts;
  for (int64_t h = 0; h < kHkv; ++h) counts.push_back(at::bincount(labels[h], {}, clusters));
  const at::Tensor sizes = at::stack(counts).to(at::kInt);                // [Hkv, C]
  const at::Tensor starts = (sizes.cumsum(-1, at::kInt) - sizes).contiguous();
  const at::Tensor scores = at::randn({kHkv, clusters}, longs.dtype(at::kFloat));
  const at::Tensor last_selected = at::zeros({kHkv, n}, longs), hits = at::zeros({}, longs);
  time_with_events(state, [&] {
    cuda::cluster_rows(scores, sizes, starts, members, taken, sinks, n - recent, n,
                       last_selected, /*step=*/100, /*oldest_hit=*/99, hits);
  });
  // Every cluster's score, size and start; the taken members' ids, their cache steps read
  // and written, and the rows written.
  set_bytes(state, double(kHkv) * double(clusters * 12 + taken * (4 + 16) + 1024 * 8));
}
BENCHMARK(BM_gpu_cluster_rows)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_topk(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0);
  const KernelPath path = state.range(1) ? KernelPath::kAten : KernelPath::kAuto;
  at::Tensor scores = at::randn({kHkv, n}, at::TensorOptions(kGpu).dtype(at::kFloat));
  // PQCache's rows at B = 1024: 32 sinks, the top 496, a window of 495 and the current entry.
  time_with_events(state, [&] { top_k_ascending(scores, 496, 32, 496, path); });
  set_bytes(state, double(kHkv * n) * 4);
}
BENCHMARK(BM_gpu_topk)->ArgsProduct({{32768, 131072}, {0, 1}})->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_topk_chunk(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0), chunk = state.range(1);
  at::Tensor scores = at::randn({kHkv, n}, at::TensorOptions(kGpu).dtype(at::kFloat));
  time_with_events(state, [&] { cuda::top_pages(scores, n, 496, 0, 1, n + 496, 32, chunk); });
  set_bytes(state, double(kHkv * n) * 4);
  state.counters["chosen"] = double(cuda::top_pages_auto_chunk(n, 496));
}
BENCHMARK(BM_gpu_topk_chunk)->ArgsProduct({{32768, 131072}, {0, 2048, 4096, 8192}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// ClusterKV's prefill clustering inputs: n keys per KV head in fp32 (cosine_kmeans widens the
// model's keys once, then every Lloyd step reads them so) and the first C = n / 80 of them as
// centroids.
struct Clustering {
  at::Tensor keys, centroids;  // [Hkv, n, d], [Hkv, C, d]
};
Clustering make_clustering(int64_t n) {
  at::manual_seed(11);
  at::Tensor keys = at::randn({kHkv, n, kD}, at::TensorOptions(kGpu).dtype(at::kFloat));
  return {keys, keys.narrow(1, 0, n / 80).clone()};
}

void BM_gpu_cosine_assign(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  time_with_events(state, [&] { cosine_assign(c.keys, c.centroids); });
  state.counters["GFLOPs"] = benchmark::Counter(
      2e-9 * double(c.keys.numel()) * double(c.centroids.size(1)),
      benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gpu_cosine_assign)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_cosine_assign_bf16(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  const at::Tensor keys = c.keys.to(at::kBFloat16);
  time_with_events(state, [&] { cosine_assign(keys, c.centroids); });
  state.counters["GFLOPs"] = benchmark::Counter(
      2e-9 * double(keys.numel()) * double(c.centroids.size(1)),
      benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gpu_cosine_assign_bf16)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_cosine_assign_block(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  const at::Tensor keys = state.range(2) ? c.keys.to(at::kBFloat16) : c.keys;
  const int64_t block = int64_t(1) << state.range(1), C = c.centroids.size(1);
  time_with_events(state, [&] { cosine_assign(keys, c.centroids, KernelPath::kAten, block); });
  const int64_t chunk = cosine_assign_chunk(kHkv, C, block);
  state.counters["chunks"] = double((keys.size(1) + chunk - 1) / chunk);
  state.counters["GFLOPs"] = benchmark::Counter(2e-9 * double(keys.numel()) * double(C),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gpu_cosine_assign_block)->ArgsProduct({{32768, 131072}, {24, 26, 28}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_gpu_centroid_update(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  const at::Tensor labels = cosine_assign(c.keys, c.centroids);  // [Hkv, n]
  time_with_events(state, [&] { cluster_means(c.keys, labels, c.centroids); });
  set_bytes(state, double(c.keys.numel()) * 4 + double(labels.numel()) * 8);
}
BENCHMARK(BM_gpu_centroid_update)->Arg(32768)->Arg(131072)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_gpu_kmeans(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  int steps = 0;
  time_with_events(state, [&] {
    steps = cosine_kmeans(c.keys, c.centroids.size(1), 1, 20).iterations;
  });
  state.counters["steps"] = steps;
}
BENCHMARK(BM_gpu_kmeans)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_gpu_kmeans_keys_dtype(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const Clustering c = make_clustering(state.range(0));
  const at::Tensor keys = c.keys.to(at::kBFloat16);
  int steps = 0;
  time_with_events(state, [&] {
    steps = cosine_kmeans(keys, c.centroids.size(1), 1, 20, /*products_in_keys_dtype=*/true)
                .iterations;
  });
  state.counters["steps"] = steps;
}
BENCHMARK(BM_gpu_kmeans_keys_dtype)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_gpu_pq_encode(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const auto path = state.range(0) ? KernelPath::kAten : KernelPath::kAuto;
  at::manual_seed(13);
  const int64_t m = 2, K = 64, n = 32768;
  const at::Tensor pool = at::randn({kHkv * n, kD}, at::TensorOptions(kGpu).dtype(at::kBFloat16));
  const at::Tensor centroids = at::randn({kHkv, m, K, kD / m}, at::TensorOptions(kGpu));
  const at::Tensor rows = at::arange(kHkv, at::TensorOptions(kGpu).dtype(at::kLong))
                              .mul(n).add(n - 1).view({kHkv, 1});  // [Hkv, 1]: each head's last key
  at::Tensor codes = at::zeros({kHkv, m, n}, at::TensorOptions(kGpu).dtype(at::kByte));
  time_with_events(state, [&] { pq_encode_rows(centroids, pool, rows, codes, n - 1, path); });
}
BENCHMARK(BM_gpu_pq_encode)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
void BM_gpu_sdpa(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0);
  const auto bf16 = at::TensorOptions(kGpu).dtype(at::kBFloat16);
  at::Tensor q = at::randn({1, kHq, 1, kD}, bf16);  // [batch, Hq, one query, d]
  at::Tensor k = at::randn({1, kHkv, n, kD}, bf16), v = at::randn({1, kHkv, n, kD}, bf16);
  time_with_events(state, [&] {
    at::scaled_dot_product_attention(q, k, v, {}, 0.0, false, std::nullopt, /*enable_gqa=*/true);
  });
  set_bytes(state, double(kHkv * n) * 2 * kD * 2);
}
BENCHMARK(BM_gpu_sdpa)->Arg(32768)->Arg(131072)->UseManualTime()->Unit(benchmark::kMicrosecond);
#endif

#if TORCH_VERSION_MAJOR >= 2
// ATen's scaled_dot_product_attention kernels enabled as `kernel` asks (0: as they were; 1, 2,
// 3: flash, memory-efficient or cuDNN alone), restored at the end of the scope.
class SdpKernels {
 public:
  explicit SdpKernels(int64_t kernel) {
    at::Context& c = at::globalContext();
    if (kernel == 0) return;
    c.setSDPUseFlash(kernel == 1);
    c.setSDPUseMemEfficient(kernel == 2);
    c.setSDPUseCuDNN(kernel == 3);
    c.setSDPUseMath(false);
  }
  ~SdpKernels() {
    at::Context& c = at::globalContext();
    c.setSDPUseFlash(flash_);
    c.setSDPUseMemEfficient(efficient_);
    c.setSDPUseCuDNN(cudnn_);
    c.setSDPUseMath(math_);
  }
  SdpKernels(const SdpKernels&) = delete;
  SdpKernels& operator=(const SdpKernels&) = delete;

 private:
  bool flash_ = at::globalContext().userEnabledFlashSDP();
  bool efficient_ = at::globalContext().userEnabledMemEfficientSDP();
  bool cudnn_ = at::globalContext().userEnabledCuDNNSDP();
  bool math_ = at::globalContext().userEnabledMathSDP();
};

void BM_gpu_prefill_attention(benchmark::State& state) {
  if (!at::cuda::is_available()) return state.SkipWithError("skipped: no GPU");
  const int64_t n = state.range(0);
  const auto bf16 = at::TensorOptions(kGpu).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({kHq, n, kD}, bf16);  // [Hq, L, d], as prefill_layer has them
  const at::Tensor k = at::randn({kHkv, n, kD}, bf16), v = at::randn({kHkv, n, kD}, bf16);
  const SdpKernels only(state.range(1));
  try {  // ATen throws where no enabled kernel takes the call
    state.counters["choice"] = fused_prefill_attention_kernel(q);
    fused_causal_attention(q, k, v);
  } catch (const std::exception& e) {
    return state.SkipWithError(("skipped: this kernel refuses the call: " +
                                std::string(e.what()).substr(0, 120)).c_str());
  }
  time_with_events(state, [&] { fused_causal_attention(q, k, v); });
  const double flops = 2.0 * double(kHq) * double(n) * double(n) * double(kD);  // causal half
  state.counters["TFLOPs"] =
      benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gpu_prefill_attention)
    ->ArgsProduct({{32768}, {0, 1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace kvb
#endif  // KVBENCH_CUDA_KERNELS
