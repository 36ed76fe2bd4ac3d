// Kernel bandwidth benchmarks (framework-free kernels in kernels/), Llama-3-8B attention shape:
// 32 query heads, 8 KV heads, head dim 128, fp32.
//   copy/<MiB>                      memcpy of a buffer as large as the 32k K+V (read + write)
//   read_sum/<MiB>                  a parallel sum over it: read-only streaming, decode's ceiling
//   kv_stream/<n>                   dense decode's reads at n tokens without its arithmetic: each
//                                   KV head's K and V in 16-row tiles, prefetched as the
//                                   kernel does here (what its access pattern alone reaches), each
//                                   head in chunks of rows as the kernel splits its work
//   fma_peak                        the widest FMA the kernels use, on every thread: the compute
//                                   ceiling (GBps_ceiling: dense fp32 decode at g = 4 does one
//                                   lane-FMA per K/V byte, so lane-FMAs per ns = GB/s)
//   all_rows_bf16/<n>               every row of a bf16 pool of n tokens (--dtype bf16's path)
//   dense_decode/<n>                dense GQA decode attention over n tokens (4k..32k)
//   dense_decode_cached/<n>         one KV head of n rows, in cache: the kernel's arithmetic rate
//   dense_decode_avx2/<n>           the same capped at AVX2 (what a CPU without AVX-512 runs,
//                                   and a Zen 4 by default: dense_decode there too)
//   dense_decode_avx512/<n>         the same with AVX-512 (a Zen 4's other path); each of
//                                   the two an error line where the CPU lacks its set
//   sparse_decode/<n>/<budget>      sparse decode attention, `budget` rows per KV head picked as
//                                   whole 16-row pages at random from a paged pool of n rows
//   quest_scores/<n>, pq_scores/<n>, cosine_assign/<n>, centroid_update/<n>
// Counters: bytes (moved per call) and GBps (bytes / time, decimal GB/s). Copy counts read +
// write. Compare dense/sparse GBps with copy's GBps of the same run (ratios in README).
// Run: kvbench_bench
//   --benchmark_filter='copy|read_sum|kv_stream|dense_decode|all_rows|sparse_decode|quest|pq_|cosine|centroid'
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/decode_attention.h"
#include "kernels/kmeans_assign.h"
#include "kernels/kv_prefetch.h"
#include "kernels/pq_scoring.h"
#include "kernels/quest_scoring.h"
#include "kernels/simd.h"

#if KVB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kvb::kernels {
namespace {

constexpr int64_t kHq = 32, kHkv = 8, kD = 128;

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes"] = bytes;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_copy(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0)) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * double(bytes));
}
// 256 MiB = K+V of 32k tokens x 8 KV heads x 128 x fp32.
BENCHMARK(BM_copy)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

// Read-only streaming: a parallel sum over the buffer with the kernels' thread count (OpenMP's
// default), each thread's share read as 8 interleaved sequential streams, four vector
// accumulators and software prefetch 4 KB ahead in each stream. Decode attention only reads K
// and V, so this, not memcpy, is its ceiling. Why 8 streams: a core's hardware prefetchers
// keep more lines in flight over several streams than over one; on a 2-core Sapphire Rapids
// VM (2026-11-29) one stream a thread read 21-29 GB/s, 4 streams 36, 8 streams 38, 16 35. A
// plain summing loop reaches a third of one stream's rate on a VM whose prefetcher is weak.
constexpr int kSumStreams = 8;

KVB_TARGET_AVX2 float sum_avx2(const float* x, int64_t begin, int64_t end) {
#if KVB_X86_DISPATCH
  const int64_t part = (end - begin) / kSumStreams / 32 * 32;  // floats a stream
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < part; i += 32)
    for (int s = 0; s < kSumStreams; ++s) {
      const float* p = x + begin + s * part + i;
      _mm_prefetch(reinterpret_cast<const char*>(p + 1024), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + 1040), _MM_HINT_T0);
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 24));
    }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float total = 0;
  for (float lane : lanes) total += lane;
  for (int64_t i = begin + kSumStreams * part; i < end; ++i) total += x[i];
  return total;
#else
  float total = 0;
  for (int64_t i = begin; i < end; ++i) total += x[i];
  return total;
#endif
}

float sum_portable(const float* x, int64_t begin, int64_t end) {
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t i = begin; i < end; ++i) total += x[i];
  return total;
}

void BM_read_sum(benchmark::State& state) {
  const int64_t n = (int64_t(state.range(0)) << 20) / int64_t(sizeof(float));
  const std::vector<float> x = random_floats(size_t(n), 4);
  const bool avx2 = cpu_has_avx2_fma();
  for (auto _ : state) {
    double total = 0;
#pragma omp parallel reduction(+ : total)
    {
      const int64_t share = (n + omp_get_num_threads() - 1) / omp_get_num_threads();
      const int64_t begin = std::min(n, share * omp_get_thread_num());
      const int64_t end = std::min(n, begin + share);
      total += avx2 ? sum_avx2(x.data(), begin, end) : sum_portable(x.data(), begin, end);
    }
    benchmark::DoNotOptimize(total);
  }
  set_bytes(state, double(n) * sizeof(float));
}
BENCHMARK(BM_read_sum)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

// One KV head's K then V rows of each 16-row tile summed, prefetched as the decode kernel
// does on this CPU (kernels/kv_prefetch.h; under kSpreadNta, as the AVX-512 kernel: later V
// rows' lines beside the K rows and later K rows' lines beside the V rows, non-temporally): the
// dense kernel's reads without its scores, softmax and PV products.
#if KVB_X86_DISPATCH
KVB_TARGET_AVX2 inline void add_row(const float* row, __m256& a0, __m256& a1) {
  for (int64_t c = 0; c < kD; c += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row + c));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(row + c + 8));
  }
}
#endif

KVB_TARGET_AVX2 float kv_stream_avx2(const float* k, const float* v, int64_t n) {
#if KVB_X86_DISPATCH
  constexpr int64_t kTileRows = 16;
  const RowPrefetch plan = cpu_row_prefetch(int(sizeof(float)));
  const bool spread = plan == RowPrefetch::kSpreadNta;
  if (spread) prefetch_first_rows_nta(k, v, static_cast<const int64_t*>(nullptr), 0, n, kD);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  for (int64_t t0 = 0; t0 < n; t0 += kTileRows) {
    const int64_t t1 = std::min(n, t0 + kTileRows);
    for (int64_t j = t0; j < t1; ++j) {
      if (!spread) prefetch_ahead(k, v, nullptr, j, n, kD, plan);
      if (spread && j + kSpreadValuesAhead < n)
        prefetch_nta(v + (j + kSpreadValuesAhead) * kD, kD * int64_t(sizeof(float)));
      add_row(k + j * kD, a0, a1);
    }
    for (int64_t j = t0; j < t1; ++j) {
      if (spread && j + kSpreadKeysAhead < n)
        prefetch_nta(k + (j + kSpreadKeysAhead) * kD, kD * int64_t(sizeof(float)));
      add_row(v + j * kD, a0, a1);
    }
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(a0, a1));
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
#else
  float total = 0;
  for (int64_t i = 0; i < n * kD; ++i) total += k[i] + v[i];
  return total;
#endif
}

void BM_kv_stream(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto k = random_floats(size_t(kHkv * n * kD), 2), v = random_floats(size_t(kHkv * n * kD), 3);
  const bool avx2 = cpu_has_avx2_fma();
  // Work items as the kernel splits them (one per head on 2 threads, 8 per head on 16).
  const int64_t chunks = decode_attention_chunks(omp_get_max_threads(), kHkv, n);
  const int64_t per = (n + chunks - 1) / chunks;
  for (auto _ : state) {
    double total = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : total)
    for (int64_t item = 0; item < kHkv * chunks; ++item) {
      const int64_t h = item / chunks, r0 = std::min(n, item % chunks * per);
      const int64_t rows = std::min(n, r0 + per) - r0;
      const float* kh = k.data() + (h * n + r0) * kD;
      const float* vh = v.data() + (h * n + r0) * kD;
      total += avx2 ? kv_stream_avx2(kh, vh, rows)
                    : sum_portable(kh, 0, rows * kD) + sum_portable(vh, 0, rows * kD);
    }
    benchmark::DoNotOptimize(total);
  }
  set_bytes(state, 2.0 * double(kHkv * n * kD) * sizeof(float));
}
BENCHMARK(BM_kv_stream)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

// Peak FMA throughput: 12 independent chains per thread (more than latency x ports), the
// widest vectors the decode kernel dispatches to. Counter lane_fma_per_ns = GBps_ceiling.
#define KVB_FMA_CHAINS(Vec, fma, a, b)                            \
  Vec acc[12];                                                    \
  for (Vec & x : acc) x = b;                                      \
  for (int64_t s = 0; s < steps; ++s)                             \
    for (Vec & x : acc) x = fma(x, a, b);                         \
  for (Vec & x : acc) benchmark::DoNotOptimize(x);                \
  return steps * 12 * int64_t(sizeof(Vec) / sizeof(float))

#if KVB_X86_DISPATCH
KVB_TARGET_AVX512 int64_t fma_lanes_avx512(int64_t steps) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  KVB_FMA_CHAINS(__m512, _mm512_fmadd_ps, a, b);
}
KVB_TARGET_AVX2 int64_t fma_lanes_avx2(int64_t steps) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  KVB_FMA_CHAINS(__m256, _mm256_fmadd_ps, a, b);
}
#endif

int64_t fma_lanes_scalar(int64_t steps) {
  const float a = 0.999f, b = 1e-3f;
  KVB_FMA_CHAINS(float, std::fma, a, b);
}
#undef KVB_FMA_CHAINS

int64_t fma_lanes(int64_t steps) {
#if KVB_X86_DISPATCH
  if (cpu_has_avx512f()) return fma_lanes_avx512(steps);
  if (cpu_has_avx2_fma()) return fma_lanes_avx2(steps);
#endif
  return fma_lanes_scalar(steps);
}

void BM_fma_peak(benchmark::State& state) {
  const int64_t steps = 1 << 20;
  int64_t lanes = 0;
  for (auto _ : state) {
#pragma omp parallel reduction(+ : lanes)
    lanes += fma_lanes(steps);
  }
  const double per_call = double(lanes) / double(state.iterations());
  state.counters["lane_fma_per_ns"] =
      benchmark::Counter(per_call * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GBps_ceiling"] = state.counters["lane_fma_per_ns"];
}
BENCHMARK(BM_fma_peak)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_dense_decode(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto q = random_floats(size_t(kHq * kD), 1);
  auto k = random_floats(size_t(kHkv * n * kD), 2), v = random_floats(size_t(kHkv * n * kD), 3);
  std::vector<float> out(size_t(kHq * kD));
  for (auto _ : state) {
    dense_decode_attention(q.data(), k.data(), v.data(), out.data(), kHq, kHkv, n, kD, n * kD,
                           1.f / std::sqrt(float(kD)));
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, double(decode_attention_bytes(kHq, kHkv * n, kD, false)));
}
BENCHMARK(BM_dense_decode)->Arg(4096)->Arg(8192)->Arg(16384)->Arg(32768)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// The kernel's arithmetic rate: one KV head (4 query heads) of n rows, small enough to stay in
// one core's cache between calls (under the kernel's threading threshold: one thread). Beside
// dense_decode/32768 it tells whether a change to the arithmetic moves the memory-bound rate.
void BM_dense_decode_cached(benchmark::State& state) {
  const int64_t n = state.range(0), g = kHq / kHkv;
  auto q = random_floats(size_t(g * kD), 1);
  auto k = random_floats(size_t(n * kD), 2), v = random_floats(size_t(n * kD), 3);
  std::vector<float> out(size_t(g * kD));
  for (auto _ : state) {
    dense_decode_attention(q.data(), k.data(), v.data(), out.data(), g, 1, n, kD, n * kD,
                           1.f / std::sqrt(float(kD)));
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, double(decode_attention_bytes(g, n, kD, false)));
}
BENCHMARK(BM_dense_decode_cached)->Arg(512)->UseRealTime();

// dense_decode with the kernels' instruction set set to `level` (and restored after): the other
// paths' rates on one CPU, which runs only its default_simd_limit() in dense_decode.
void dense_decode_at(benchmark::State& state, SimdLevel level) {
  const SimdLevel before = simd_limit();
  simd_limit() = level;
  const bool has = level == SimdLevel::kAvx512 ? cpu_has_avx512f() : cpu_has_avx2_fma();
  if (has) BM_dense_decode(state);
  else state.SkipWithError("this CPU lacks that instruction set");
  simd_limit() = before;
}

// Capped at AVX2: where dense_decode runs AVX-512, that path's gain; on a Zen 4, which runs
// AVX2 by default, the same kernel as dense_decode.
void BM_dense_decode_avx2(benchmark::State& state) { dense_decode_at(state, SimdLevel::kAvx2); }
BENCHMARK(BM_dense_decode_avx2)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

// The AVX-512 kernel where the CPU has it (a Zen 4 runs AVX2 by default: what it leaves).
void BM_dense_decode_avx512(benchmark::State& state) {
  dense_decode_at(state, SimdLevel::kAvx512);
}
BENCHMARK(BM_dense_decode_avx512)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

// Every row of a bf16 pool through the sparse entry point (the engine's path for --dtype bf16
// on the CPU): half the K/V bytes of fp32, plus the row ids.
void BM_all_rows_bf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto q = random_floats(size_t(kHq * kD), 1);
  auto widen = [](const std::vector<float>& x) {
    std::vector<bf16> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], sizeof(bits));
      out[i] = bf16{uint16_t(bits >> 16)};
    }
    return out;
  };
  const auto k = widen(random_floats(size_t(kHkv * n * kD), 2));
  const auto v = widen(random_floats(size_t(kHkv * n * kD), 3));
  std::vector<int64_t> offsets{0}, rows(size_t(kHkv * n));
  std::iota(rows.begin(), rows.end(), int64_t(0));
  for (int64_t h = 1; h <= kHkv; ++h) offsets.push_back(h * n);
  std::vector<float> out(size_t(kHq * kD));
  for (auto _ : state) {
    sparse_decode_attention(q.data(), k.data(), v.data(), KvElement::kBF16, offsets.data(),
                            rows.data(), out.data(), kHq, kHkv, kD, 1.f / std::sqrt(float(kD)));
    benchmark::DoNotOptimize(out.data());
  }
  const double attended = double(kHkv * n);
  set_bytes(state, attended * kD * 2 * sizeof(bf16) + attended * sizeof(int64_t));
}
BENCHMARK(BM_all_rows_bf16)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_sparse_decode(benchmark::State& state) {
  const int64_t n = state.range(0), budget = state.range(1), pages = n / 16;
  auto q = random_floats(size_t(kHq * kD), 1);
  auto k = random_floats(size_t(n * kHkv * kD), 2), v = random_floats(size_t(n * kHkv * kD), 3);
  // Pool of n * Hkv rows (all heads' blocks interleaved, as LayerKV allocates them); each head
  // takes budget/16 random pages of its own. Calls cycle through `sets` different selections
  // (>= 64 MiB of K/V touched in all, twice the L3) so rows come from DRAM, not cache.
  std::mt19937_64 gen(7);
  const int64_t bytes_per_set = 2 * kHkv * budget * kD * int64_t(sizeof(float));
  const int64_t sets = std::max<int64_t>(8, (int64_t(64) << 20) / bytes_per_set);
  std::vector<std::vector<int64_t>> offsets(sets, std::vector<int64_t>{0}), rows(sets);
  for (int64_t set = 0; set < sets; ++set)
    for (int64_t h = 0; h < kHkv; ++h) {
      std::vector<int64_t> ids(static_cast<size_t>(pages));
      std::iota(ids.begin(), ids.end(), int64_t(0));
      std::shuffle(ids.begin(), ids.end(), gen);
      ids.resize(size_t(budget / 16));
      std::sort(ids.begin(), ids.end());
      for (int64_t p : ids)
        for (int64_t r = 0; r < 16; ++r) rows[set].push_back((p * kHkv + h) * 16 + r);
      offsets[set].push_back(int64_t(rows[set].size()));
    }
  std::vector<float> out(size_t(kHq * kD));
  int64_t set = 0;
  for (auto _ : state) {
    sparse_decode_attention(q.data(), k.data(), v.data(), offsets[set].data(), rows[set].data(),
                            out.data(), kHq, kHkv, kD, 1.f / std::sqrt(float(kD)));
    benchmark::DoNotOptimize(out.data());
    set = (set + 1) % sets;
  }
  set_bytes(state, double(decode_attention_bytes(kHq, int64_t(rows[0].size()), kD, true)));
}
BENCHMARK(BM_sparse_decode)->Args({32768, 256})->Args({32768, 1024})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_quest_scores(benchmark::State& state) {
  const int64_t n = state.range(0), P = n / 16, g = kHq / kHkv;
  auto q = random_floats(size_t(kHq * kD), 1);
  auto lo = random_floats(size_t(kHkv * P * kD), 2), hi = random_floats(size_t(kHkv * P * kD), 3);
  std::vector<float> out(size_t(kHkv * P));
  for (auto _ : state) {
    quest_page_scores(q.data(), lo.data(), hi.data(), out.data(), kHkv, g, P, kD, P * kD, true);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 4.0 * double(2 * kHkv * P * kD + kHkv * P));
}
BENCHMARK(BM_quest_scores)->Arg(32768)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_pq_scores(benchmark::State& state) {
  const int64_t n = state.range(0), g = kHq / kHkv, m = 16, K = 256, s = kD / m;
  auto q = random_floats(size_t(kHq * kD), 1);
  auto cent = random_floats(size_t(kHkv * m * K * s), 2);
  std::vector<uint8_t> codes(size_t(kHkv * m * n));
  std::mt19937_64 gen(3);
  for (auto& c : codes) c = uint8_t(gen() & 255);
  std::vector<float> out(size_t(kHkv * g * n));
  for (auto _ : state) {
    pq_scores(q.data(), cent.data(), codes.data(), out.data(), kHkv, g, m, K, s, n, n);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, double(codes.size()) + 4.0 * double(out.size() + cent.size()));
}
BENCHMARK(BM_pq_scores)->Arg(32768)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ClusterKV prefill clustering at L tokens, C = L / 80 clusters: one Lloyd step's parts.
void BM_cosine_assign(benchmark::State& state) {
  const int64_t n = state.range(0), C = n / 80;
  auto keys = random_floats(size_t(kHkv * n * kD), 1), cent = random_floats(size_t(kHkv * C * kD), 2);
  std::vector<int32_t> labels(size_t(kHkv * n));
  for (auto _ : state) {
    cosine_assign(keys.data(), cent.data(), labels.data(), kHkv, n, C, kD);
    benchmark::DoNotOptimize(labels.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2e-9 * double(kHkv * n * C * kD),
                                                benchmark::Counter::kIsIterationInvariantRate);
  set_bytes(state, 4.0 * double(keys.size() + cent.size() + labels.size()));
}
BENCHMARK(BM_cosine_assign)->Arg(4096)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_centroid_update(benchmark::State& state) {
  const int64_t n = state.range(0), C = n / 80;
  auto keys = random_floats(size_t(kHkv * n * kD), 1), old = random_floats(size_t(kHkv * C * kD), 2);
  std::vector<int32_t> labels(size_t(kHkv * n));
  std::mt19937_64 gen(3);
  for (auto& l : labels) l = int32_t(gen() % uint64_t(C));
  std::vector<float> out(old.size());
  for (auto _ : state) {
    centroid_update(keys.data(), labels.data(), old.data(), out.data(), kHkv, n, C, kD);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 4.0 * double(keys.size() + labels.size() + 2 * out.size()));
}
BENCHMARK(BM_centroid_update)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();


}  // namespace
}  // namespace kvb::kernels
