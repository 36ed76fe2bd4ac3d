// PQCache (Zhang et al., SIGMOD 2025, https://arxiv.org/abs/2407.12820; HugoZHL/PQCache).
//
// Prefill (paper Section 3.2): the prompt keys after the sinks, per KV head, are split into m
// sub-vectors of d/m channels; each of the Hkv x m sub-spaces is clustered by K-means into 2^b
// centroids and each key is stored as m codes of b bits. This harness runs the clustering
// synchronously (the paper overlaps it with the GPU work on CPU cores and caps the iterations
// by time; here Lloyd runs to tol 1e-4 or max_iter).
// Decode (Section 3.3): the query's sub-vectors against the centroids give a table [m, 2^b];
// score(token) = sum over sub-spaces of table[i, code_i(token)] ~ q.k. softmax(score / sqrt(d))
// over the candidates, summed over the GQA group, ranks the candidates; the top-k are fetched.
// Attended per KV head = sinks + local window + top-k + the current token. Tokens leaving the
// local window during decoding get the code of their nearest centroid (no re-clustering).
// The block cache (Section 3.4): 128-token blocks, 4096 tokens per layer, LFU; hits counted.
#include "methods/retrieval/pqcache.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "engine/device.h"
#include "engine/kernel_adapter.h"
#include "methods/common/config.h"
#include "methods/common/selection.h"

namespace kvb {

namespace {

// Squared distances of points to centroids. x: [G, N, s], c: [G, K, s] -> [G, N, K].
at::Tensor squared_distances(const at::Tensor& x, const at::Tensor& c) {
  at::Tensor x2 = x.pow(2).sum(-1, /*keepdim=*/true);                 // [G, N, 1]
  at::Tensor c2 = c.pow(2).sum(-1).unsqueeze(1);                      // [G, 1, K]
  return (x2 - 2.0 * at::bmm(x, c.transpose(1, 2)) + c2);             // [G, N, K]
}

// Centroid ids as the scoring kernels read them: uint8 where K <= 256 (every default: no
// conversion at each step), else int64.
at::Tensor as_codes(const at::Tensor& ids, int64_t K) { return K <= 256 ? ids.to(at::kByte) : ids; }

// Room in index.storage for `columns` codes per (head, sub-space); index.codes stays its view.
void reserve_codes(PQIndex& index, int64_t columns) {
  if (index.storage.defined() && index.storage.size(2) >= columns) return;
  // A quarter more at once: a step's new codes are written in place, where a concatenation
  // copied every code at every step (2 MiB a layer at 128k).
  const int64_t have = index.codes.size(2);
  const int64_t capacity = std::max(columns, have + have / 4 + 64);
  at::Tensor wider = at::empty({index.codes.size(0), index.codes.size(1), capacity},
                               index.codes.options());  // [Hkv, m, capacity]
  wider.narrow(2, 0, have).copy_(index.codes);
  index.storage = wider;
  index.codes = wider.narrow(2, 0, have);
}

}  // namespace

PQIndex pq_build(const at::Tensor& keys, int m, int bits, int max_iter, double tol, uint64_t seed) {
  const int64_t Hkv = keys.size(0), N = keys.size(1), d = keys.size(2), s = d / m;
  const int64_t G = Hkv * m;
  const int64_t K = std::min<int64_t>(int64_t(1) << bits, N);
  // x: [Hkv, N, m, s] -> [Hkv, m, N, s] -> [G, N, s]
  at::Tensor x = keys.to(at::kFloat).reshape({Hkv, N, m, s}).permute({0, 2, 1, 3})
                     .reshape({G, N, s}).contiguous();

  // Init: K distinct random keys per sub-space group (partial Fisher-Yates).
  std::mt19937_64 rng(seed);
  std::vector<int64_t> init(G * K), perm(N);
  for (int64_t g = 0; g < G; ++g) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = 0; i < K; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, N - 1);
      std::swap(perm[i], perm[pick(rng)]);
      init[g * K + i] = perm[i];
    }
  }
  at::Tensor init_idx = at::tensor(init, at::kLong).to(x.device()).view({G, K, 1}).expand({G, K, s});
  at::Tensor c = x.gather(1, init_idx).contiguous();  // [G, K, s]

  // Converged when the squared centroid shift <= tol x mean per-feature variance (sklearn).
  at::Tensor threshold = tol * x.var(/*dim=*/1, /*unbiased=*/false).mean(-1);  // [G]
  at::Tensor ones = at::ones({G, N}, x.options());
  for (int it = 0; it < max_iter; ++it) {
    at::Tensor assign = squared_distances(x, c).argmin(-1);  // [G, N]
    at::Tensor sums = at::zeros({G, K, s}, x.options())
                          .scatter_add_(1, assign.unsqueeze(-1).expand({G, N, s}), x);
    at::Tensor counts = at::zeros({G, K}, x.options()).scatter_add_(1, assign, ones);  // [G, K]
    at::Tensor moved = at::where(counts.unsqueeze(-1) > 0,
                                 sums / counts.clamp_min(1.0).unsqueeze(-1), c);  // empty: keep
    at::Tensor shift = (moved - c).pow(2).sum({1, 2});  // [G]
    c = moved;
    if ((shift <= threshold).all().item<bool>()) break;
  }
  PQIndex index;
  index.centroids = c.view({Hkv, m, K, s});
  // Final assignment to the final centroids: [G, N] -> [Hkv, m, N].
  index.codes = as_codes(squared_distances(x, c).argmin(-1), K).view({Hkv, m, N});
  return index;
}

at::Tensor pq_reconstruct(const at::Tensor& centroids, const at::Tensor& codes) {
  const int64_t m = centroids.size(0), s = centroids.size(2), n = codes.size(1);
  at::Tensor parts =
      centroids.gather(1, codes.to(at::kLong).unsqueeze(-1).expand({m, n, s}));  // [m, n, s]
  return parts.permute({1, 0, 2}).reshape({n, m * s});                            // [n, d]
}

int64_t LfuBlockCache::access(const std::vector<int64_t>& token_blocks) {
  // Tokens per block this step, counted in a flat array by block id (ids are token offsets
  // over the block size: small and dense), and the blocks in order of first reference. A
  // std::map of the counts took 0.2-0.4 ms a layer's step here, 8 heads of 496 tokens: more
  // than the rest of a GPU decode step's layer.
  touched_.clear();
  for (const int64_t b : token_blocks) {
    if (b < 0) throw std::invalid_argument("LfuBlockCache: negative block id");
    if (b >= int64_t(references_.size())) references_.resize(size_t(b) + 1, 0);
    if (references_[size_t(b)]++ == 0) touched_.push_back(b);
  }
  int64_t hits = 0;  // the tokens of the cached blocks (fewer than the step's blocks)
  for (const auto& cached : entries_)  // a cached block was referenced once: references_ covers it
    hits += references_[size_t(cached.first)];
  if (capacity_ > 0) admit();
  for (const int64_t b : touched_) references_[size_t(b)] = 0;
  return hits;
}

void LfuBlockCache::admit() {
  // The step's blocks, most referenced first (ties: lower id), at most capacity of them: the
  // reference's top-k blocks by tokens (torch.topk, sorted=False: it leaves their order to the
  // implementation, and the order decides which new blocks push which out).
  const size_t admitted = std::min(touched_.size(), size_t(capacity_));
  std::partial_sort(touched_.begin(), touched_.begin() + std::ptrdiff_t(admitted), touched_.end(),
                    [this](int64_t a, int64_t b) {
                      const int32_t ra = references_[size_t(a)], rb = references_[size_t(b)];
                      return ra != rb ? ra > rb : a < b;
                    });
  ++steps_;
  std::vector<int64_t> kept;  // earlier_blocks: the blocks no victim is taken from, sorted
  if (eviction_ == Eviction::earlier_blocks) {
    kept.assign(touched_.begin(), touched_.begin() + std::ptrdiff_t(admitted));
    std::sort(kept.begin(), kept.end());
  }
  for (size_t i = 0; i < admitted; ++i) {
    const int64_t block = touched_[i];
    // any_block: the order of insertion; earlier_blocks: the step (its ties to the lower id).
    const int64_t now = eviction_ == Eviction::any_block ? ++admissions_ : steps_;
    auto it = entries_.find(block);
    if (it != entries_.end()) {  // one use more: the last to reach its new frequency
      Entry& e = it->second;
      by_use_.erase({e.frequency, e.reached, block});
      e = Entry{e.frequency + 1, now};
      by_use_.insert({e.frequency, e.reached, block});
      continue;
    }
    if (int64_t(entries_.size()) >= capacity_) evict(kept);
    entries_[block] = Entry{1, now};
    by_use_.insert({1, now, block});
  }
}

void LfuBlockCache::evict(const std::vector<int64_t>& admitted) {
  auto victim = by_use_.begin();
  while (std::binary_search(admitted.begin(), admitted.end(), std::get<2>(*victim))) ++victim;
  entries_.erase(std::get<2>(*victim));
  by_use_.erase(victim);
}

const ConfigFields<PQCacheConfig>& PQCacheConfig::fields() {
  using C = PQCacheConfig;
  static const auto f =
      ConfigFields<C>()
          .field("sinks", &C::sinks, "initial tokens always attended", check::at_least(0))
          .field("ratio", &C::ratio,
                 "> 0: attend (L - sinks) x ratio tokens beyond sinks and the current one (the "
                 "paper: 1/5, 1/10) on every prompt, whatever the cell's budget "
                 "(method.derived_budget); 0: split the budget B exactly",
                 check::in_interval("[0, 1]"))
          .field("local_share", &C::local_share,
                 "share of those for the local window (the reference's recent_ratio)",
                 check::in_interval("[0, 1]"))
          .field("subspaces", &C::subspaces, "m: PQ sub-spaces (must divide the head dim)",
                 check::at_least(1))
          .field("bits", &C::bits, "b: 2^b centroids per sub-space", check::in_interval("[1, 16]"))
          .field("max_iter", &C::max_iter, "K-means (Lloyd) iterations at most",
                 check::at_least(1))
          .field("tol", &C::tol, "K-means convergence tolerance", check::at_least(0))
          .field("cache_block", &C::cache_block, "tokens per block of the LFU cache",
                 check::at_least(1))
          .field("cache_tokens", &C::cache_tokens, "LFU cache capacity per layer, tokens",
                 check::at_least(0))
          .field("cache_eviction", &C::cache_eviction,
                 "which cached block a new one evicts, the least frequently used of: any_block "
                 "(the reference's LFU, the step's blocks inserted one by one, so new blocks can "
                 "push each other out) or earlier_blocks (those the step does not admit)",
                 check::one_of({"any_block", "earlier_blocks"}))
          .unused_when("cache_block", [](const C& c) { return c.cache_tokens == 0; },
                       "cache_tokens is 0 (no cache)")
          .unused_when("cache_eviction",
                       [](const C& c) { return c.cache_tokens < c.cache_block; },
                       "cache_tokens < cache_block (no block fits: no cache)");
  return f;
}

void PQCacheConfig::check_budget(int64_t budget, const std::string& where) const {
  if (ratio == 0.0 && budget < 1)
    throw InputError(where + ".budget: PQCache with ratio 0 derives its split from the budget, "
                     "which must be >= 1, got " + std::to_string(budget));
}

void PQCache::begin(const MethodContext& context) {
  accounting_.wait();  // an earlier run's jobs count into the counters and caches reset here
  RetrievalMethod::begin(context);
  if (context.head_dim % config_.subspaces != 0)
    throw InputError("pqcache.subspaces: " + std::to_string(config_.subspaces) +
                     " does not divide the head dimension " + std::to_string(context.head_dim));
  if (config_.ratio > 0.0) {
    // The paper's ratio mode: (L - sinks) x ratio tokens beyond sinks and the current token.
    sinks_ = config_.sinks;
    const double beyond = double(std::max<int64_t>(context.prompt_length - sinks_, 0)) * config_.ratio;
    local_ = int64_t(beyond * config_.local_share);
    topk_ = int64_t(beyond * (1.0 - config_.local_share));
  } else {
    // Budget mode: exactly B = sinks + local + topk + 1. Sinks give way to at most half of B
    // when B is small (B < 2 x sinks + 1), so local + top-k keep at least half.
    const int64_t B = std::max<int64_t>(context.budget, 1);
    sinks_ = std::min<int64_t>(config_.sinks, (B - 1) / 2);
    const int64_t rest = B - 1 - sinks_;
    local_ = int64_t(std::floor(double(rest) * config_.local_share));
    topk_ = rest - local_;
  }
  index_.assign(context.num_layers, PQIndex{});
  cache_.assign(context.num_layers,
                LfuBlockCache(config_.cache_tokens / config_.cache_block,
                              config_.cache_eviction == "any_block"
                                  ? LfuBlockCache::Eviction::any_block
                                  : LfuBlockCache::Eviction::earlier_blocks));
  pending_blocks_.assign(context.num_layers, {});
}

void PQCache::on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         LayerKV& kv) {
  const int64_t L = k.size(1);  // k: [Hkv, L, d]
  if (L <= sinks_) return;
  const uint64_t seed = context_.seed * 1000003ULL + uint64_t(layer) * 7919ULL + 17ULL;
  index_[layer] = pq_build(k.narrow(1, sinks_, L - sinks_), config_.subspaces, config_.bits,
                           config_.max_iter, config_.tol, seed);
  update_index_bytes(layer, kv);
}

void PQCache::on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) {
  PQIndex& index = index_[layer];
  if (!index.centroids.defined()) return;
  // Entries sinks .. n-2-local are outside the window (the current one is n-1): all need codes.
  const int64_t n = kv.size(0);  // retrieval keeps every entry: all heads hold n
  const int64_t need = n - 1 - local_ - sinks_, have = index.codes.size(2);
  if (need <= have) return;
  if (!kv.equally_filled()) throw std::logic_error("pqcache: heads of different sizes");
  reserve_codes(index, need);
  // The leaving keys' pool rows [Hkv, need - have], a view of the row table, read in place.
  const at::Tensor rows = kv.leading_rows(sinks_ + need).narrow(1, sinks_ + have, need - have);
  pq_encode_rows(index.centroids, kv.key_pool(), rows, index.storage, have);
  index.codes = index.storage.narrow(2, 0, need);
  update_index_bytes(layer, kv);
}

void PQCache::update_index_bytes(int layer, const LayerKV& kv) {
  const PQIndex& index = index_[layer];
  // Codes at b bits each (as the paper counts them) + centroids in the KV dtype.
  const int64_t code_bits = index.codes.numel() * int64_t(config_.bits);
  set_index_bytes(layer, (code_bits + 7) / 8 +
                             index.centroids.numel() * int64_t(kv.key_pool().element_size()));
}

PQCache::Layout PQCache::layout(const LayerKV& kv) const {
  // Retrieval keeps every entry: every head holds the same n, so one layout for all heads.
  Layout step;
  step.current = kv.size(0) - 1;
  step.sinks = std::min(sinks_, step.current);
  step.local = std::min(local_, step.current - step.sinks);
  step.candidates = step.current - step.local - step.sinks;
  return step;
}

bool PQCache::ranks(int layer, const Layout& step) const {
  return step.candidates > 0 && topk_ > 0 && index_[layer].centroids.defined() &&
         step.sinks == sinks_;
}

at::Tensor PQCache::selected_rows(int layer, const at::Tensor& q, const Layout& step) const {
  const PQIndex& index = index_[layer];
  const int64_t Hkv = index.centroids.size(0), g = context_.group_size(), d = context_.head_dim;
  // All KV heads at once: the PQ scores [Hkv, g, candidates], softmax over the candidates,
  // summed over the group, top-k per head with the sinks before and the window after them (per
  // code combination: one kernel on a GPU, pq_top_k). The candidates sinks .. current - local
  // - 1 lie between the two.
  const int64_t k = std::min(topk_, step.candidates);
  return pq_top_k(q.reshape({Hkv, g, d}), index.centroids,
                  index.codes.narrow(2, 0, step.candidates), 1.0 / std::sqrt(double(d)), k,
                  step.sinks, step.local + 1);
}

RetrievalMethod::DeviceRows PQCache::select_rows(int layer, const at::Tensor& q, const LayerKV& kv) {
  const Layout step = layout(kv);
  if (!ranks(layer, step)) return {};  // select_sparse
  const at::Tensor rows = selected_rows(layer, q, step);  // [Hkv, sinks + k + local + 1]
  std::vector<at::Tensor>& pending = pending_blocks_[layer];
  // The top-k's logical entries, a view: their blocks are taken at the flush, so no operator
  // runs per step for them.
  pending.push_back(rows.narrow(1, step.sinks, std::min(topk_, step.candidates)));
  // on_decode_step reads every layer's batch at once; this bounds the batch where nothing calls
  // it (a method driven layer by layer, as the tests do)
  if (pending.size() >= 2 * kCacheFlushSteps) flush_caches({layer});
  return {rows};
}

void PQCache::on_decode_step(std::vector<LayerKV>&) {
  std::vector<int> due;
  for (size_t layer = 0; layer < pending_blocks_.size(); ++layer)
    if (!pending_blocks_[layer].empty()) due.push_back(int(layer));
  if (!due.empty() && pending_blocks_[size_t(due[0])].size() >= kCacheFlushSteps) flush_caches(due);
}

void PQCache::flush_caches(const std::vector<int>& layers) {
  // Logical entries -> candidate offsets -> blocks, every layer's in one copy to the host,
  // which the accounting's thread waits for: the host never waits for the device here (a read
  // per layer waited 32 times a step, one read for all of them once every 32 steps).
  std::vector<at::Tensor> flat;  // per layer flushed: its steps' [Hkv, k], flattened in order
  struct Flushed {
    int layer;
    int64_t steps, per_step;  // per_step: the entries a step fetched, Hkv x k
  };
  std::vector<Flushed> counts;
  for (const int layer : layers) {
    std::vector<at::Tensor>& pending = pending_blocks_[size_t(layer)];
    if (pending.empty()) continue;
    flat.push_back(at::stack(pending).flatten());
    counts.push_back({layer, int64_t(pending.size()), pending[0].numel()});
    pending.clear();
  }
  if (flat.empty()) return;
  const at::Tensor ids =
      at::floor_divide(at::cat(flat) - sinks_, config_.cache_block).to(at::kInt).contiguous();
  const HostCopy blocks(ids);
  auto count = [this, blocks, counts] {
    const int32_t* b = blocks.wait().data_ptr<int32_t>();
    for (const Flushed& f : counts) {
      LfuBlockCache& cache = cache_[size_t(f.layer)];
      for (int64_t step = 0; step < f.steps; ++step, b += f.per_step)
        count_cache(cache.access(std::vector<int64_t>(b, b + f.per_step)), f.per_step);
    }
  };
  // On a GPU the host goes on queueing steps while the thread counts; on the CPU the step's
  // threads are on every core already, so the counting runs here, as before.
  if (ids.device().is_cpu())
    count();
  else
    accounting_.post(count);
}

void PQCache::settle_caches(const std::vector<int>& layers) {
  flush_caches(layers);
  accounting_.wait();
}

std::map<std::string, double> PQCache::counters() const {
  // Settling the deferred accounting changes no result: the cache sees the same blocks in the
  // same order as if each step had been counted when it ran.
  PQCache& self = const_cast<PQCache&>(*this);
  std::vector<int> layers(pending_blocks_.size());
  std::iota(layers.begin(), layers.end(), 0);
  self.settle_caches(layers);
  std::map<std::string, double> c = RetrievalMethod::counters();
  // derived_budget: the count the ratio gave this prompt (ratio mode only), as KV-Compress's.
  if (config_.ratio > 0.0) c["derived_budget"] = double(attends_all_up_to());
  return c;
}

std::vector<std::vector<int64_t>> PQCache::select_sparse(int layer, const at::Tensor&,
                                                         const LayerKV& kv,
                                                         const std::vector<int>& heads) {
  const Layout step = layout(kv);
  if (ranks(layer, step))  // every head holds the same entries: the base asks select_rows first
    throw std::logic_error("pqcache: a ranked selection asked of the host path");
  settle_caches({layer});  // earlier steps' blocks first: the cache sees every step in order
  // No ranking (no index: the prompt held no key after the sinks; or nothing to rank): the
  // sinks, the most recent candidates, the local window and the current entry.
  std::vector<int64_t> picked;
  if (step.candidates > 0 && topk_ > 0)
    for (int64_t i = std::max<int64_t>(0, step.candidates - topk_); i < step.candidates; ++i)
      picked.push_back(i);
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < step.sinks; ++i) chosen.push_back(i);
  for (int64_t i : picked) chosen.push_back(step.sinks + i);
  for (int64_t i = step.current - step.local; i <= step.current; ++i) chosen.push_back(i);
  std::vector<int64_t> fetched_blocks;
  for (size_t h = 0; h < heads.size(); ++h)
    for (int64_t i : picked) fetched_blocks.push_back(i / config_.cache_block);
  count_cache(cache_[layer].access(fetched_blocks), int64_t(fetched_blocks.size()));
  return std::vector<std::vector<int64_t>>(heads.size(), chosen);
}

KVB_REGISTER_METHOD(make_method_info<PQCache, PQCacheConfig>({
    .name = "pqcache",
    .title = "PQCache (Zhang et al., SIGMOD 2025)",
    .paper = "https://arxiv.org/abs/2407.12820",
    .family = "retrieval",
    .uses_budget = true,
    .budget_tolerance = 0.0,
    .fidelity =
        "follows the paper and HugoZHL/PQCache (m=2, b=6, 32 sinks, local:top-k 1:1, PQ on every "
        "layer, softmax of PQ scores summed over the GQA group, nearest-centroid codes for tokens "
        "leaving the window, 128-token LFU block cache of 4096 tokens per layer, the step's "
        "top-32 blocks inserted in turn, a new one evicting the least frequently used, this step's too, as the "
        "reference's lfu_cache.cc, hits counted; cache_eviction: earlier_blocks spares the "
        "step's blocks); "
        "harness choices: budget mode (ratio 0, default) attends exactly B = sinks + local + top-k "
        "+ 1 with sinks reduced to (B-1)/2 when B < 65; Lloyd K-means runs synchronously to tol "
        "1e-4 or max_iter=100 (the reference bounds iterations by overlap time) on the prompt's "
        "keys (the reference's also reads the local window's rows of its host buffer before "
        "they are copied there: stale or random rows, a defect not reproduced); the step's "
        "blocks enter the cache most referenced first (the reference's order is torch.topk's "
        "unsorted one); 2^b centroids "
        "become min(2^b, keys) on short prompts; ties at the top-k's last score go to the lower "
        "token index on every device (the reference's torch.topk leaves them to the "
        "implementation, and tokens with equal codes tie); the softmax's weights are computed once per "
        "code combination (K^m <= 4096), equal to the per-token computation's up to rounding",
}));

}  // namespace kvb
