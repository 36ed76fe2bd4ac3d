// The hook interface a KV-cache compression method implements, and what the engine hands it:
// the engine calls these hooks per layer; it never names a method. The methods floor
// (methods/method.h) adds the registry, presets and config plumbing on top.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/kv_store.h"

namespace kvb {

class ModelView;

// What a method knows about the model and the sequence it runs on.
struct MethodContext {
  int num_layers = 0;
  int num_heads = 0;     // Hq
  int num_kv_heads = 0;  // Hkv
  int head_dim = 0;      // d
  int64_t budget = 0;    // B: KV entries attended per KV head per layer per decode step (0 = none)
  int64_t prompt_length = 0;
  uint64_t seed = 0;
  // The model, read-only and narrow (engine/model_view.h): InfiniGen speculates the next
  // layer's queries and calibrates with it. Null in unit tests that build contexts by hand.
  const ModelView* model = nullptr;
  int group_size() const { return num_heads / num_kv_heads; }  // g = Hq / Hkv
};

// 0, k, 2k, ..., units * k: the indptr of `units` lists of k entries each, in one device op.
at::Tensor equal_counts_indptr(int64_t units, int64_t k, const at::TensorOptions& longs);

// The indptr of `units` equal counts k, [units + 1] = 0, k, 2k, ..., kept for the next call
// that asks for the same: a decode step's layers ask for the same one (a device launch each on
// a GPU; the next step's count gives new offsets). Read-only: shared.
class EqualCountsIndptr {
 public:
  const at::Tensor& get(int64_t units, int64_t k, const at::TensorOptions& longs);

 private:
  int64_t units_ = -1, k_ = -1;
  at::Tensor indptr_;
};

// Which resident entries each attention unit of a layer attends to at one decode step, in the
// ragged form GPU attention kernels take (flashinfer's indptr/indices), on the layer's device.
// A unit is a KV head, whose g query heads share its entries; or, with per_query_head, a query
// head q attending only to its own list of KV head q / g's entries (the per-query-head
// selection of references that repeat the KV, e.g. KVCache-Factory's SnapKV; the attended
// count of a KV head is then the mean over its query heads).
struct Selection {
  bool all = true;  // every resident entry of every KV head (indptr/indices undefined)
  bool per_query_head = false;
  at::Tensor indptr;   // [units + 1] int64: unit u attends indices[indptr[u] .. indptr[u + 1])
  at::Tensor indices;  // [nnz] int64: logical indices into the unit's KV head (unique per unit)
  // > 0: indices is [units * row_width], unit u's list the first indptr[u + 1] - indptr[u]
  // entries of its row of row_width (from_row_prefixes: counts known only on the device).
  int64_t row_width = 0;
  // The longest unit's count when known on the host without reading the device (-1: not known).
  int64_t max_count = -1;
  // Each unit's count when known on the host (empty: only on the device). The session then
  // tallies the attended entries on the host: no device ops for the bookkeeping.
  std::vector<int64_t> host_counts;

  static Selection everything() { return Selection{}; }
  // One list per unit, from the host; the tensors are placed on `device`.
  static Selection from_lists(const std::vector<std::vector<int64_t>>& lists,
                              bool per_query_head, at::Device device);
  // Every unit attends k entries: rows [units, k] int64 (any device), no host round trip; the
  // indptr from `indptr` when given (shared by the calls of a decode step's layers).
  static Selection from_rows(const at::Tensor& rows, bool per_query_head,
                             EqualCountsIndptr* indptr = nullptr);
  // Unit u attends the first counts[u] entries of rows[u]: rows [units, k] int64, counts [units]
  // int64 in 0..k, both on the device: the host never reads the counts.
  static Selection from_row_prefixes(const at::Tensor& rows, const at::Tensor& counts,
                                     bool per_query_head);

  int64_t units() const { return indptr.size(0) - 1; }
  // Host copies of the lists, one per unit (reads the device: for tests, recall, inspection).
  std::vector<std::vector<int64_t>> lists() const;
};

class Method {
 public:
  virtual ~Method() = default;

  // A new sequence starts: reset all per-sequence state.
  virtual void begin(const MethodContext& context) { context_ = context; }

  // Prefill of one layer, after its attention was computed over the whole prompt.
  // q: [Hq, L, d], k, v: [Hkv, L, d] (post-RoPE). `kv` already holds the L entries; an eviction
  // method calls kv.keep(...) here, a retrieval method builds its index.
  virtual void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k,
                          const at::Tensor& v, LayerKV& kv) {}

  // After every layer's prefill: for methods that decide across layers (KV-Compress).
  virtual void after_prefill(std::vector<LayerKV>& layers) {}

  // A decode step begins, before any layer runs (the step's token is not appended yet): for
  // methods that evict across layers while decoding (KV-Compress's continual compression), or
  // that apply here what the previous step chose on the device (H2O's evictions). Every
  // caller of the decode hooks calls it before each step's first on_attention_input.
  virtual void on_decode_step(std::vector<LayerKV>& layers) {}

  // Decode step: the attention input of `layer` (after its RMSNorm), x: [1, D]. Called for
  // every layer before that layer's on_append/select (its q/k/v may be computed already).
  virtual void on_attention_input(int layer, const at::Tensor& x, int64_t position) {}

  // A decode token's k, v ([Hkv, d], post-RoPE) were just appended to `kv`.
  virtual void on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) {}

  // Decode step: which entries to attend to. q: [Hq, d] (post-RoPE). The current token is
  // resident already (appended just before); a selection includes it unless its reference
  // leaves it out (Quest's evaluation path ranks the current page like any other).
  virtual Selection select(int layer, const at::Tensor& q, const LayerKV& kv) {
    return Selection::everything();
  }

  // After the decode attention: probs[h] is [g, n_h], the softmax of the group's query heads
  // over the entries attended by KV head h (in the order of `selection`, or logical order);
  // with a per-query-head selection, probs[q] is [1, n_q] for each of the Hq query heads.
  virtual void on_attention(int layer, const Selection& selection,
                            const std::vector<at::Tensor>& probs, LayerKV& kv) {}

  // Whether on_attention needs the probabilities (the engine skips collecting them otherwise).
  virtual bool wants_attention() const { return false; }

  // Whether the method may keep a decode step's q, k, v or layer input (or views of them) past
  // the hook that receives them. Under CUDA graphs (SessionOptions::cuda_graphs) the next step
  // rewrites those tensors in place, so graphs are used only for a method that says no.
  virtual bool holds_step_tensors() const { return true; }

  // The method's own counters for the sequence so far (e.g. bytes a GPU deployment would
  // fetch, cache hits, index bytes), as name -> value; the runner stores their mean over a
  // cell's samples as cell metrics.
  virtual std::map<std::string, double> counters() const { return {}; }

 protected:
  MethodContext context_;
};

}  // namespace kvb
