// PQCache (Zhang et al., SIGMOD 2025, https://arxiv.org/abs/2407.12820; HugoZHL/PQCache).
// Product quantization of the keys as a retrieval index: per KV head, d splits into m
// sub-spaces, each clustered (K-means, 2^b centroids) on the prompt keys after the sinks; a key
// is stored as m codes. At a decode step the query's sub-vectors against the centroids give a
// table [m, 2^b]; a token's approximate score is the sum of its codes' table entries. The top-k
// tokens by softmax of that score (summed over the GQA group) are fetched beside the sinks and a
// local window. The building blocks are exposed for the tests.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "engine/common/host_worker.h"
#include "methods/common/retrieval.h"

namespace kvb {

// A product quantizer of Hkv heads' keys.
struct PQIndex {
  at::Tensor centroids;  // [Hkv, m, K, d/m] float
  at::Tensor codes;      // [Hkv, m, N] centroid ids: uint8 where K <= 256, else int64
  at::Tensor storage;    // [Hkv, m, capacity >= N]: codes is its leading columns once decode
                         // tokens are coded (undefined before), the rest room for more
};

// K-means per (head, sub-space), batched: init from K distinct random keys (std::mt19937_64
// seeded with `seed`), Lloyd iterations until the centroids move less than tol x the data's
// mean per-feature variance (scikit-learn's criterion, tol = 1e-4) or `max_iter`; an empty
// cluster keeps its centroid. K = min(2^bits, N). keys: [Hkv, N, d].
PQIndex pq_build(const at::Tensor& keys, int m, int bits, int max_iter, double tol, uint64_t seed);
// Approximate keys from codes. centroids: [m, K, s], codes: [m, n] -> [n, d] (one head).
at::Tensor pq_reconstruct(const at::Tensor& centroids, const at::Tensor& codes);
// Approximate q.k via the lookup table: pq_scores in engine/kernel_adapter.h.

// The GPU-side block cache of the paper (Section 3.4): blocks of consecutive tokens shared by a
// layer's KV heads, LFU eviction.
class LfuBlockCache {
 public:
  // Which cached block a new one evicts (the least frequently used; of those, the one that
  // reached its frequency first).
  enum class Eviction {
    any_block,       // any, one this step admitted too (the reference's lfu_cache.cc inserts
                     // the step's blocks one by one: new blocks can push each other out)
    earlier_blocks,  // only blocks this step does not admit (kvbench's rule before 2026-11-29)
  };
  explicit LfuBlockCache(int64_t capacity_blocks, Eviction eviction = Eviction::any_block)
      : capacity_(capacity_blocks), eviction_(eviction) {}
  // One decode step: `token_blocks` holds the block of every fetched token (all heads). Returns
  // how many were hits against the cache as it was, then admits the step's blocks in turn (the
  // most referenced first, ties: lower id; at most `capacity`): a cached block's frequency grows
  // by one, a new one enters with frequency 1 and, the cache full, evicts as `eviction` says.
  int64_t access(const std::vector<int64_t>& token_blocks);
  bool contains(int64_t block) const { return entries_.count(block) != 0; }
  int64_t size() const { return int64_t(entries_.size()); }

 private:
  struct Entry {
    int64_t frequency = 0;
    // When it reached that frequency: admissions counted (any_block), or steps (earlier_blocks,
    // whose blocks of one step tie, the lower id first).
    int64_t reached = 0;
  };
  // Admits the step's touched_ blocks (references_ holds their counts).
  void admit();
  // Removes the block to evict: the first of by_use_ (not one of `admitted`, sorted, with
  // earlier_blocks).
  void evict(const std::vector<int64_t>& admitted);
  int64_t capacity_;
  Eviction eviction_;
  int64_t admissions_ = 0, steps_ = 0;
  std::map<int64_t, Entry> entries_;
  std::set<std::tuple<int64_t, int64_t, int64_t>> by_use_;  // (frequency, reached, block)
  std::vector<int32_t> references_;  // per block id: this step's tokens in it (0 between steps)
  std::vector<int64_t> touched_;     // this step's blocks
};

struct PQCacheConfig {
  int64_t sinks = 32;        // initial tokens always attended
  double ratio = 0.0;        // > 0: attend (L - sinks) x ratio tokens beyond sinks + current
                             // (paper: 1/5, 1/10); 0: derive from the budget B exactly
  double local_share = 0.5;  // share of those for the local window (reference recent_ratio)
  int subspaces = 2;         // m
  int bits = 6;              // b: 2^b centroids per sub-space
  int max_iter = 100;        // Lloyd iterations at most
  double tol = 1e-4;         // K-means convergence tolerance
  int64_t cache_block = 128;    // tokens per block of the LFU cache
  int64_t cache_tokens = 4096;  // LFU cache capacity per layer, tokens
  std::string cache_eviction = "any_block";  // LfuBlockCache::Eviction, by name

  static const ConfigFields<PQCacheConfig>& fields();
  void check_budget(int64_t budget, const std::string& where) const;
};

class PQCache : public RetrievalMethod {
 public:
  static constexpr int kDenseLayers = 0;  // PQ on every layer (the reference: all layers)
  explicit PQCache(const PQCacheConfig& c) : RetrievalMethod(kDenseLayers), config_(c) {}
  void begin(const MethodContext& context) override;
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  LayerKV& kv) override;
  void on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) override;
  // Counts the fetched blocks into the LFU caches every kCacheFlushSteps steps.
  void on_decode_step(std::vector<LayerKV>& layers) override;
  // Codes come from the pool's rows, rankings from q where it is given: nothing kept.
  bool holds_step_tensors() const override { return false; }

  // The split of one step's attended entries: sinks + local + topk + 1 (current).
  int64_t sinks() const { return sinks_; }
  int64_t local() const { return local_; }
  int64_t topk() const { return topk_; }
  // Layer's index: centroids [Hkv, m, K, s], codes [Hkv, m, N] of logical entries sinks..
  // sinks + N - 1 (undefined before prefill or when the prompt has no key after the sinks).
  const PQIndex& index(int layer) const { return index_[layer]; }
  // Runs the cache accounting still pending first (see pending_blocks_).
  std::map<std::string, double> counters() const override;

 protected:
  // sinks + local + top-k + 1: B in budget mode; in ratio mode the prompt's share, whatever B
  // (the reference compresses every prompt by its ratio).
  int64_t attends_all_up_to() const override { return sinks_ + local_ + topk_ + 1; }
  // sinks + top-k + local window + current, the same count for every head, on the device.
  DeviceRows select_rows(int layer, const at::Tensor& q, const LayerKV& kv) override;
  // The steps with nothing to rank (short prompts): sinks, recent candidates, window, current.
  std::vector<std::vector<int64_t>> select_sparse(int layer, const at::Tensor& q,
                                                  const LayerKV& kv,
                                                  const std::vector<int>& heads) override;

 private:
  // Where a decode step's candidates sit: logical sinks .. sinks + candidates - 1.
  struct Layout {
    int64_t current, sinks, local, candidates;
  };
  Layout layout(const LayerKV& kv) const;
  // Whether the step's candidates are ranked by PQ score: the layer has an index, and there
  // are candidates and a top-k to pick (else select_sparse's recency fallback).
  bool ranks(int layer, const Layout& step) const;
  // [Hkv, sinks + k + local + 1] logical entries, ascending, on the device (where ranks()):
  // the sinks, the top-k candidates by PQ score, the window and the current entry.
  at::Tensor selected_rows(int layer, const at::Tensor& q, const Layout& step) const;
  void update_index_bytes(int layer, const LayerKV& kv);
  // The LFU cache is simulated on the host from each step's fetched blocks; select_rows keeps
  // each step's top-k entries on the device ([Hkv, k], in step order), turned into block
  // ids, every layer's at once, every kCacheFlushSteps steps (on_decode_step) and by
  // counters(). On a GPU their copy to the host and the caches' updates run on accounting_'s
  // thread: kvbench's simulation of the cache, not the method's work, so no decode step waits
  // for the copy or the counting (on the CPU, whose cores the step's threads hold, they run
  // at the flush). The caches see the same blocks in the same order either way.
  static constexpr size_t kCacheFlushSteps = 32;
  void flush_caches(const std::vector<int>& layers);
  // Flushes `layers` and waits until the caches have counted every step so far.
  void settle_caches(const std::vector<int>& layers);
  std::vector<std::vector<at::Tensor>> pending_blocks_;  // per layer

  PQCacheConfig config_;
  int64_t sinks_ = 0, local_ = 0, topk_ = 0;
  std::vector<PQIndex> index_;        // per layer
  std::vector<LfuBlockCache> cache_;  // per layer; between settles, only accounting_'s jobs
  // Last: destroyed first, it finishes its jobs while the caches they update still exist.
  HostWorker accounting_;
};

}  // namespace kvb
