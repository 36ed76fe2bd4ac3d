// Engine throughput with the "full" method (no compression): prefill and decode tokens/s for
//   stories260K (the shared folder, engine/common/shared_folder.h, + /models/stories260K) at 256
//   and 512 tokens (its max_position_embeddings is 512),
//   the embedded trained model kvbench-tiny (models/kvbench-tiny) at 1k and 2k tokens, and
//   a random Llama-shaped model (8 layers, hidden 1024, 16 heads / 4 KV heads of 64,
//   intermediate 2816, vocab 32000) at 1k and 8k tokens.
// prefill/<model>/<n>: one prefill of n tokens. decode/<model>/<n>: 32 greedy decode steps after
// an (untimed) prefill of n - 32 tokens, so the last step attends to n positions.
// decode_method/<method>/4096/512: the same 32 steps on the random model at 4k tokens with each
// method at budget 512: what a method's per-step work (selection, bookkeeping, eviction) costs
// beside Full's decode.
// prefill_method/<method>/4096/512: one prefill of 4k tokens on the same random model with each
// method at budget 512; counter method_share: the share of prefill_s in the method's prefill
// hook (scoring, eviction, index build). The wall time also holds Method::begin, which
// prefill_s does not (InfiniGen calibrates on its text there, in every iteration here).
// decode_host/<method>/1024/256: the same 32 steps at 1k tokens, budget 256, on a random model
// with Llama-3-8B's 32 layers and GQA group of 4 but so narrow (hidden 128, 8 / 2 heads of 16)
// that the arithmetic is a small share of the step: the host's cost of a decode step (ATen's
// per-call overhead, kvbench's own bookkeeping), which is what a GPU waits on when its decode
// step is launch-bound.
// pqcache_select/<n>/<composition>: PQCache's selection of one layer (bench_pqcache_select).
// pqcache_lfu/<n>: one layer's step of PQCache's LFU cache accounting on the host.
// weights_hash/random-llama-8L-1024: weights_hash over that model's fp32 weights (0.62 GB)
// (what InfiniGen's calibration cache is named by), counter bytes_per_second.
// kv_evict/<pattern>/1024: one decode step's KV bookkeeping alone, on one layer of 8 KV heads of
// 128 (fp32), B = 1024: append a token, then evict one entry per head, as StreamingLLM does
// (`sinks`: B entries between steps, the oldest after 4 sinks goes) or as H2O does
// (`scattered`: B - 1 after each eviction, a pseudo-random entry per head goes). Counts
// `rows_moved/step`, the pool rows copied.
// kv_prefill_append/<n>: a prefill's KV write of one layer, n tokens of 8 KV heads of 128
// (fp32): LayerKV::append_many of the whole prompt into an empty store (its blocks allocated,
// the rows copied). Why: the free list's lowest-id scan once made this quadratic, 2e9
// comparisons a layer at 128k.
// Every decode benchmark also counts `aten_calls/step`: ATen operators that compute or copy,
// called per decode step from outside another operator (RecordFunction callbacks; views not
// counted). On a GPU each launches a kernel or more from the host, so this counts the step's
// launch overhead on any device (kvbench's own kernels, called without ATen, are not in it).
// Of those, `aten_allocs/step` are allocations (`empty`, `empty_like`, ...: host work, no
// device work), so calls - allocs are ATen's launches.
// KVBENCH_TRACE_CALLS=1: each decode benchmark also prints, to stderr, the counted operators by
// name with their calls per step, most called first (where a method's calls come from).
// Run: [OMP_NUM_THREADS=N] kvbench_bench [--benchmark_filter=<regex>] (N threads where set,
// else every core; a value that is no thread count is refused, exit 2).
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/common/heap.h"
#include "engine/common/shared_folder.h"
#include "engine/common/thread_pools.h"
#include "engine/kernel_adapter.h"
#include "engine/model/llama_model.h"
#include "engine/session.h"
#include "methods/common/eviction.h"
#include "methods/method.h"
#include "methods/retrieval/pqcache.h"

namespace kvb {
namespace {

constexpr int kDecodeSteps = 32;

using ModelSource = std::function<std::shared_ptr<LlamaModel>()>;

// nullptr when the folder is absent.
std::shared_ptr<LlamaModel> stories260k() {
  static const std::shared_ptr<LlamaModel> model = [] {
    const std::string dir = shared_folder() + "/models/stories260K";
    return std::filesystem::exists(dir + "/model.safetensors") ? LlamaModel::load(dir) : nullptr;
  }();
  return model;
}

std::shared_ptr<LlamaModel> kvbench_tiny() {
  static const std::shared_ptr<LlamaModel> model = LlamaModel::from_reference("kvbench-tiny");
  return model;
}

ModelConfig llama_shaped_config() {
  return llama_config({.layers = 8, .hidden = 1024, .ffn = 2816, .heads = 16, .kv_heads = 4,
                       .head_dim = 64, .vocab = 32000, .tied = false});
}

std::shared_ptr<LlamaModel> random_llama() {
  static const std::shared_ptr<LlamaModel> model = LlamaModel::random(llama_shaped_config(), 0);
  return model;
}

std::shared_ptr<LlamaModel> narrow_32_layers() {
  static const std::shared_ptr<LlamaModel> model = LlamaModel::random(
      llama_config({.layers = 32, .hidden = 128, .ffn = 256, .heads = 8, .kv_heads = 2,
                    .head_dim = 16, .vocab = 512, .tied = false}),
      0);
  return model;
}

// n deterministic ids spread over the vocabulary, past the 3 special tokens.
std::vector<int> synthetic_prompt(int64_t n, int vocab_size) {
  std::vector<int> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(3 + int((i * 37) % (vocab_size - 3)));
  return ids;
}

std::unique_ptr<Method> full_method() {
  return method_registry().get("full", "engine_bench").create(json::object());
}

void bench_prefill(benchmark::State& state, const ModelSource& source, int64_t tokens) {
  auto model = source();
  if (!model) return state.SkipWithError("model folder absent (set KVBENCH_SHARED)");
  auto method = full_method();
  const std::vector<int> prompt = synthetic_prompt(tokens, model->config.vocab_size);
  for (auto _ : state) {
    Session session(*model, *method, SessionOptions{});
    benchmark::DoNotOptimize(session.prefill(prompt));  // [V]
  }
  state.counters["tok/s"] =
      benchmark::Counter(double(state.iterations() * tokens), benchmark::Counter::kIsRate);
}

// Counts the ATen operators called from outside another operator that compute or copy
// something: views and type queries are not counted, and `to` / `contiguous` / `reshape` only
// when they copied (called _to_copy, clone or copy_).
class AtenCallCounter {
 public:
  AtenCallCounter()
      : handle_(at::addGlobalCallback(
            at::RecordFunctionCallback(&AtenCallCounter::enter, &AtenCallCounter::leave)
                .scopes({at::RecordScope::FUNCTION}))) {
    calls_ = 0;
    allocations_ = 0;
    const std::lock_guard<std::mutex> lock(trace_mutex_);
    trace_.clear();
  }
  ~AtenCallCounter() { at::removeCallback(handle_); }
  int64_t calls() const { return calls_; }
  int64_t allocations() const { return allocations_; }

  // With KVBENCH_TRACE_CALLS set: the counted calls by operator name, divided by `steps`, most
  // called first, to stderr.
  void print_trace(int64_t steps) const {
    if (!tracing()) return;
    std::vector<std::pair<int64_t, std::string>> rows;
    {
      const std::lock_guard<std::mutex> lock(trace_mutex_);
      for (const auto& [name, count] : trace_) rows.emplace_back(count, name);
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "aten calls per step by operator (%.1f in all):\n",
                 double(calls_) / double(steps));
    for (const auto& [count, name] : rows)
      std::fprintf(stderr, "  %8.2f  %s\n", double(count) / double(steps), name.c_str());
  }

 private:
  enum class Kind { kWork, kView, kMaybeCopy };
  static Kind kind(const char* name) {
    static const std::unordered_set<std::string> views = {
        "aten::view", "aten::narrow", "aten::select", "aten::slice", "aten::unsqueeze",
        "aten::squeeze", "aten::transpose", "aten::t", "aten::unflatten", "aten::expand",
        "aten::expand_as", "aten::permute", "aten::as_strided", "aten::alias", "aten::detach",
        "aten::promote_types", "aten::result_type", "aten::view_as", "aten::split",
        "aten::chunk", "aten::unbind", "aten::resolve_conj", "aten::resolve_neg"};
    static const std::unordered_set<std::string> maybe_copies = {
        "aten::to", "aten::contiguous", "aten::reshape", "aten::flatten", "aten::type_as"};
    if (views.count(name)) return Kind::kView;
    return maybe_copies.count(name) ? Kind::kMaybeCopy : Kind::kWork;
  }
  static bool copies(const char* name) {
    return std::strcmp(name, "aten::_to_copy") == 0 || std::strcmp(name, "aten::clone") == 0 ||
           std::strcmp(name, "aten::copy_") == 0;
  }
  static bool tracing() {
    static const bool on = std::getenv("KVBENCH_TRACE_CALLS") != nullptr;
    return on;
  }
  // The name is built only when tracing: counting alone allocates nothing.
  static void count(const char* name, const char* suffix = "") {
    ++calls_;
    for (const char* allocating :
         {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty"})
      if (std::strcmp(name, allocating) == 0) ++allocations_;
    if (!tracing()) return;
    const std::lock_guard<std::mutex> lock(trace_mutex_);
    ++trace_[std::string(name) + suffix];
  }
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& f) {
    if (depth_ == 0) {
      const Kind k = kind(f.name());
      if (k == Kind::kWork) count(f.name());
      pending_copy_ = k == Kind::kMaybeCopy;
      if (pending_copy_ && tracing()) pending_name_ = f.name();
    } else if (pending_copy_ && copies(f.name())) {  // a `to` or `reshape` that copied
      count(pending_name_.c_str(), " (copied)");
      pending_copy_ = false;
    }
    ++depth_;
    return nullptr;
  }
  static void leave(const at::RecordFunction&, at::ObserverContext*) { --depth_; }

  static inline std::mutex trace_mutex_;
  static inline std::map<std::string, int64_t> trace_;
  static inline thread_local std::string pending_name_;
  static inline std::atomic<int64_t> calls_{0};
  static inline std::atomic<int64_t> allocations_{0};
  static inline thread_local int depth_ = 0;
  static inline thread_local bool pending_copy_ = false;
  at::CallbackHandle handle_;
};

void bench_decode_with(benchmark::State& state, const ModelSource& source, int64_t context,
                       Method& method, int64_t budget) {
  auto model = source();
  if (!model) return state.SkipWithError("model folder absent (set KVBENCH_SHARED)");
  const std::vector<int> prompt = synthetic_prompt(context - kDecodeSteps, model->config.vocab_size);
  std::unique_ptr<Session> session;
  int token = 0;
  for (auto _ : state) {
    state.PauseTiming();
    session.reset();  // frees the previous KV cache outside the timed region
    session = std::make_unique<Session>(*model, method, SessionOptions{.budget = budget});
    token = argmax_token(session->prefill(prompt));
    state.ResumeTiming();
    for (int step = 0; step < kDecodeSteps; ++step) token = argmax_token(session->decode(token));
  }
  state.counters["tok/s"] =
      benchmark::Counter(double(state.iterations() * kDecodeSteps), benchmark::Counter::kIsRate);
  // Counted untimed (the callbacks slow every call down) over 16 more steps, each one's
  // argmax_token included as the sampler's: the mean over a KV block's worth of tokens, so the
  // work done once per new block (the device's row table) weighs as it does over a long run.
  const AtenCallCounter counter;
  for (int64_t step = 0; step < kKvBlockSize; ++step) token = argmax_token(session->decode(token));
  state.counters["aten_calls/step"] = double(counter.calls()) / double(kKvBlockSize);
  state.counters["aten_allocs/step"] = double(counter.allocations()) / double(kKvBlockSize);
  counter.print_trace(kKvBlockSize);
}

void bench_decode(benchmark::State& state, const ModelSource& source, int64_t context) {
  bench_decode_with(state, source, context, *full_method(), 0);
}

void bench_method_decode(benchmark::State& state, const std::string& name,
                         const ModelSource& source, int64_t context, int64_t budget) {
  auto method = method_registry().get(name, "engine_bench").create(json::object());
  bench_decode_with(state, source, context, *method, budget);
}

void bench_method_prefill(benchmark::State& state, const std::string& name, int64_t tokens,
                          int64_t budget) {
  auto model = random_llama();
  auto method = method_registry().get(name, "engine_bench").create(json::object());
  const std::vector<int> prompt = synthetic_prompt(tokens, model->config.vocab_size);
  double hook_s = 0, total_s = 0;
  for (auto _ : state) {
    Session session(*model, *method, SessionOptions{.budget = budget});
    benchmark::DoNotOptimize(session.prefill(prompt));  // [V]
    hook_s += session.timings().prefill_method_s;
    total_s += session.timings().prefill_s;
  }
  state.counters["method_share"] = total_s > 0 ? hook_s / total_s : 0;
}

void bench_weights_hash(benchmark::State& state) {
  auto model = random_llama();
  double bytes = 0;
  auto count = [&bytes](const at::Tensor& t) { bytes += t.defined() ? double(t.nbytes()) : 0.0; };
  count(model->embed);
  count(model->final_norm);
  count(model->lm_head);
  for (const LayerWeights& l : model->layers)
    for (const at::Tensor* t : l.all()) count(*t);
  for (auto _ : state) benchmark::DoNotOptimize(weights_hash(*model));
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void bench_kv_evict(benchmark::State& state, bool scattered) {
  constexpr int kHeads = 8, kDim = 128;
  constexpr int64_t kBudget = 1024, kSinks = 4;
  const int64_t held = scattered ? kBudget - 1 : kBudget;  // entries between steps
  LayerKV kv(kHeads, kDim, at::kFloat);
  kv.append_many(at::randn({kHeads, held, kDim}), at::randn({kHeads, held, kDim}), 0);
  const at::Tensor k = at::randn({kHeads, kDim}), v = at::randn({kHeads, kDim});
  uint64_t lcg = 1;
  int64_t position = held;
  std::vector<LayerKV::EntryRange> victims(kHeads);
  for (auto _ : state) {
    kv.append(k, v, position++);
    if (!scattered) {
      keep_sinks_and_recent(kv, kSinks, kBudget, Compaction::kShorterSide);
    } else {
      for (int h = 0; h < kHeads; ++h) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t victim = int64_t((lcg >> 33) % uint64_t(held + 1));
        victims[size_t(h)] = {victim, victim + 1};
      }
      kv.drop(victims, Compaction::kShorterSide);
    }
  }
  state.counters["rows_moved/step"] = double(kv.rows_moved()) / double(state.iterations());
}

void bench_kv_prefill_append(benchmark::State& state) {
  constexpr int kHeads = 8, kDim = 128;
  const int64_t n = state.range(0);
  const at::Tensor k = at::randn({kHeads, n, kDim}), v = at::randn({kHeads, n, kDim});
  for (auto _ : state) {
    LayerKV kv(kHeads, kDim, at::kFloat);
    kv.append_many(k, v, 0);
    benchmark::DoNotOptimize(kv.size(0));
  }
  state.counters["tokens/s"] =
      benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

// pqcache_select/<n>/<composition>: one layer's PQCache selection at n candidates, Llama-3-8B's
// 8 KV heads of 128 and 4 query heads each, PQCache's m = 2, b = 6 and top-496 between 32 sinks
// and a 497-entry window: 0 = pq_top_k (per code combination, the method's), 1 = the
// composition it replaced (the PQ scores, ATen's softmax and group sum, top_k_ascending).
void bench_pqcache_select(benchmark::State& state) {
  const int64_t n = state.range(0), H = 8, g = 4, d = 128, k = 496;
  at::manual_seed(0);
  const at::Tensor centroids = at::randn({H, 2, 64, d / 2});  // [H, m, K, s]
  const at::Tensor codes = at::randint(0, 64, {H, 2, n}, at::kByte);
  const at::Tensor q = at::randn({H, g, d});
  const double scale = 1.0 / std::sqrt(double(d));
  for (auto _ : state) {
    if (state.range(1) == 0) {
      benchmark::DoNotOptimize(pq_top_k(q, centroids, codes, scale, k, 32, 497));
    } else {
      const at::Tensor weights = at::softmax(pq_scores(q, centroids, codes, scale), -1).sum(1);
      benchmark::DoNotOptimize(top_k_ascending(weights, k, 32, 497));
    }
  }
}

// pqcache_lfu/<n>: one layer's step of PQCache's LFU block cache, the host's accounting
// (LfuBlockCache::access): at n tokens, 8 KV heads each fetching 496 distinct entries
// (pseudo-random, fixed), blocks of 128 tokens, a cache of 4096 tokens (32 blocks): PQCache's
// defaults at B = 1024. A decode step runs it once per layer (32 on Llama-3-8B); 16 steps in
// turn, each drawn afresh, so the cache evicts.
void bench_pqcache_lfu(benchmark::State& state) {
  const int64_t n = state.range(0), heads = 8, k = 496, block = 128;
  std::mt19937_64 random(7);
  std::vector<std::vector<int64_t>> steps(16);
  for (std::vector<int64_t>& blocks : steps)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<int64_t> entries(static_cast<size_t>(n));
      std::iota(entries.begin(), entries.end(), int64_t(0));
      std::shuffle(entries.begin(), entries.end(), random);
      entries.resize(size_t(k));
      std::sort(entries.begin(), entries.end());  // the top-k in index order
      for (int64_t e : entries) blocks.push_back(e / block);
    }
  LfuBlockCache cache(4096 / block);
  size_t step = 0;
  int64_t hits = 0;
  for (auto _ : state) hits += cache.access(steps[step++ % steps.size()]);
  benchmark::DoNotOptimize(hits);
}

// Wall-clock time: the work runs on at::get_num_threads() threads, not only the calling one.
void register_model(const std::string& name, const ModelSource& source,
                    const std::vector<int64_t>& contexts) {
  for (int64_t n : contexts) {
    const std::string suffix = "/" + name + "/" + std::to_string(n);
    benchmark::RegisterBenchmark(("prefill" + suffix).c_str(), bench_prefill, source, n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode" + suffix).c_str(), bench_decode, source, n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

void register_methods() {
  for (const MethodInfo* info : method_registry().all())
    benchmark::RegisterBenchmark(("decode_method/" + info->name + "/4096/512").c_str(),
                                 bench_method_decode, info->name, random_llama, 4096, 512)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (const MethodInfo* info : method_registry().all())
    benchmark::RegisterBenchmark(("prefill_method/" + info->name + "/4096/512").c_str(),
                                 bench_method_prefill, info->name, 4096, 512)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (const MethodInfo* info : method_registry().all())
    benchmark::RegisterBenchmark(("decode_host/" + info->name + "/1024/256").c_str(),
                                 bench_method_decode, info->name, narrow_32_layers, 1024, 256)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (const int64_t n : {32768, 131072})
    for (const int64_t composition : {0, 1})
      benchmark::RegisterBenchmark("pqcache_select", bench_pqcache_select)
          ->Args({n, composition})
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  for (const int64_t n : {32768, 131072})
    benchmark::RegisterBenchmark("pqcache_lfu", bench_pqcache_lfu)
        ->Arg(n)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (const int64_t n : {32768, 131072})
    benchmark::RegisterBenchmark("kv_prefill_append", bench_kv_prefill_append)
        ->Arg(n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("weights_hash/random-llama-8L-1024", bench_weights_hash)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("kv_evict/sinks/1024", bench_kv_evict, false)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("kv_evict/scattered/1024", bench_kv_evict, true)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace kvb

int main(int argc, char** argv) {
  kvb::use_passive_omp_wait(argv);  // as the kvbench CLI runs
  kvb::keep_freed_heap_memory();
  // Every core, as the CLI's default, unless OMP_NUM_THREADS asks for a count (one thread's
  // rates: OMP_NUM_THREADS=1 ./build/kvbench_bench ...).
  const std::optional<int> asked = kvb::omp_num_threads(std::getenv("OMP_NUM_THREADS"));
  if (!asked) {
    std::fprintf(stderr, "kvbench_bench: OMP_NUM_THREADS=%s is not a thread count (a positive "
                 "integer, or a list such as 4,2)\n", std::getenv("OMP_NUM_THREADS"));
    return 2;
  }
  if (*asked > 0) kvb::set_cpu_threads(*asked);  // OpenBLAS's pool too, as the CLI's --threads
  else at::set_num_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  benchmark::AddCustomContext("torch_threads", std::to_string(at::get_num_threads()));
  kvb::register_model("stories260K", kvb::stories260k, {256, 512});
  kvb::register_model("kvbench-tiny", kvb::kvbench_tiny, {1024, 2048});
  kvb::register_model("random-llama-8L-1024", kvb::random_llama, {1024, 8192});
  kvb::register_methods();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
