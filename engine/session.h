// One sequence through the model: prefill of the prompt, then token-by-token decode, with the
// method's hooks called per layer. Owns the paged KV cache of the sequence.
#pragma once
#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine/decode_graphs.h"
#include "engine/kernel_adapter.h"
#include "engine/kv_store.h"
#include "engine/model/llama_layers.h"
#include "engine/model/llama_model.h"
#include "engine/method_hooks.h"
#include "engine/model_view.h"
#include "engine/phase_clock.h"

namespace kvb {

// Attended entries per (layer, KV head) over the decode steps of a session.
struct AttendedCounts {
  std::vector<double> sum;  // [layers * Hkv]
  std::vector<int64_t> min, max;
  int64_t steps = 0;
};

// The same, accumulated on the model's device when only the device knows a step's counts
// (so that counting never waits for it), on the host when the host does; read once when asked.
class AttendedTally {
 public:
  void reset(int layers, int kv_heads, at::Device device);
  // counts: [Hkv * u] int64 on the device, the entries each attention unit of `layer` attended
  // this step, u units a KV head (1, or its g query heads under a per-query-head selection):
  // a KV head's count is its units' mean, summed exactly, its min and max rounded half up.
  void add(int layer, const at::Tensor& counts, int64_t units_per_head);
  // The same counts known on the host: no device op.
  void add(int layer, const std::vector<int64_t>& counts, int64_t units_per_head);
  void step() { ++steps_; }
  AttendedCounts read() const;

 private:
  at::Tensor sum_, min_, max_;  // [layers, Hkv]: double, int64, int64
  std::vector<double> host_sum_;  // [layers * Hkv], the same for the host-known steps
  std::vector<int64_t> host_min_, host_max_;
  int64_t steps_ = 0;
};

struct SessionTimings {
  double prefill_s = 0;  // whole prefill, method hooks included (not Method::begin)
  // Method::begin at the prefill's start, timed apart from it: a method's set-up (InfiniGen's
  // calibration on its text, once per model: its authors compute it offline).
  double method_setup_s = 0;
  double prefill_method_s = 0;  // of which in Method::on_prefill (index build, eviction)
  double decode_s = 0;   // all decode steps
  // The host's time in them until each step's wait for the device (on a GPU, where the host
  // runs ahead of the device, less than decode_s unless the steps are bound by the host).
  double decode_host_s = 0;
  // The device synchronisations the decode steps made (DeviceSyncCounter); counted only on a
  // GPU of a CUDA build (syncs_counted).
  int64_t decode_syncs = 0;
  bool syncs_counted = false;
  int64_t graph_steps = 0;  // decode steps whose dense pieces replayed CUDA graphs
  double graph_capture_s = 0;  // the host capturing them, after prefill_s ends (not in it)
  double select_s = 0;   // of which in Method::on_decode_step / select / on_append / on_attention
  std::vector<double> attention_s;  // [layers]: of which in decode attention over the selection
  // The host's time in those two phases (on a GPU: launching their work, and any wait for the
  // device; where it matches the device's time, the phase is bound by the host).
  double select_host_s = 0, attention_host_s = 0;
  // The recall measurement in the decode steps (SessionOptions::track_fidelity: a full
  // attention per step), left out of decode_s and decode_host_s: not the method's cost.
  double fidelity_s = 0, fidelity_host_s = 0;
  int64_t decode_steps = 0;
  // The kernel of the prefill's causal attention: ATen's fused one by SDPBackend's number (1
  // flash, 2 memory-efficient, 3 cuDNN: engine/prefill_attention.h), or -1 for the explicit
  // chunked one. Not a timing: which kernel prefill_s timed.
  int prefill_attention_kernel = -1;
};

// Recall of the true top-B keys and attention-output error, per layer, over decode steps
// (../shared/specs/benchmarks.md, "Recall rate"). Kept only when SessionOptions asks.
struct FidelityCounts {
  std::vector<double> recall_sum, output_error_sum;  // [layers], summed over steps and heads
  std::vector<int64_t> count;                         // [layers]: steps x heads
  void reset(int layers);
};

struct SessionOptions {
  int64_t budget = 0;  // B given to the method (0: the method does not use one)
  uint64_t seed = 0;
  // Keep an uncompressed copy of the KV beside the method's view to measure recall of the
  // true top-B keys and the attention-output error at every decode step (costs a full
  // attention per step).
  bool track_fidelity = false;
  // The prefill's causal attention through ATen's fused scaled_dot_product_attention (flash
  // attention) where it applies: on a GPU, bf16/f16, LibTorch 2.x. Elsewhere, or false, the
  // explicit attention in query chunks below (the same on every LibTorch; tests compare them).
  bool fused_prefill_attention = true;
  // Bound on the explicit prefill attention's scores buffer: [Hq, chunk, L] floats. Never
  // L x L. 0: attention_score_bytes of the device (llama_layers.h).
  int64_t prefill_score_bytes = 0;
  // Prefill MLPs run over this many positions at a time, so their [rows, F] activations stay
  // bounded however long the prompt (0: 4096).
  int64_t prefill_mlp_rows = 0;
  // What methods see of the model (MethodContext::model), made by whoever loaded it so that
  // its memo and cache directory span sessions; null: the session makes its own.
  const ModelView* model_view = nullptr;
  // Decode steps replay each layer's dense piece as a CUDA graph (engine/decode_graphs.h)
  // where they can: on a GPU of a CUDA build, with a method that keeps no step tensors
  // (Method::holds_step_tensors). Elsewhere the steps run as without it.
  bool cuda_graphs = false;
};

class Session {
 public:
  Session(const LlamaModel& model, Method& method, SessionOptions options);

  // Runs the prompt; returns the logits of the last position [V] (all positions [L, V] when
  // `all_logits`). Calls Method::begin, then on_prefill per layer.
  at::Tensor prefill(const std::vector<int>& ids, bool all_logits = false);
  // Feeds one token at the next position; returns its logits [V].
  at::Tensor decode(int token);
  // Greedy generation after prefill: argmax (ties to the lowest id), stop on a stop id
  // (not included) or after max_new tokens.
  std::vector<int> generate(const std::vector<int>& prompt, int max_new,
                            const std::vector<int>& stop_ids);
  // The same from the logits of the last token fed (prefill's, or decode's after tokens fed
  // one by one, as a question read after a compressed context). The first `min_new` tokens
  // are never stop ids (their logits masked, as transformers' min_length does); the first
  // `unchecked` are not compared with them (a stop id there is kept and generated on).
  std::vector<int> generate_from(at::Tensor next_logits, int max_new,
                                 const std::vector<int>& stop_ids, int min_new = 0,
                                 int unchecked = 0);

  int64_t position() const { return position_; }
  const std::vector<LayerKV>& kv() const { return kv_; }
  // Reads the device's tally (waits for it): call after the steps, not per step.
  const AttendedCounts& attended() const;
  const SessionTimings& timings() const { return timings_; }
  const FidelityCounts& fidelity() const { return fidelity_; }
  int64_t kv_allocated_bytes() const;

  // What the method sees of the model (the options' view, or the session's own).
  const ModelView* model_view() const { return options_.model_view; }

 private:
  // InputError when `tokens` keys would reach past the model's sliding window.
  void check_context(int64_t tokens) const;
  // The residual stream through one layer: in.sum [L, D] / [1, D] and in.normed, it through
  // the layer's input norm; returns the stream after the layer and it through the next norm
  // (the next layer's input norm, the final norm after the last layer). rope: the angles of
  // the step's positions, shared by every layer.
  AddedAndNormed prefill_layer(int layer, AddedAndNormed in, const RopeAngles& rope);
  // What a decode layer starts from: the residual stream (and it normed) and the layer's
  // queries, keys and values of the step's token ([Hq, 1, d], [Hkv, 1, d] x2).
  struct LayerInput {
    AddedAndNormed stream;
    LayerQKV qkv;
  };
  // A decode layer up to its attention: the method's hooks, the token's K/V appended, the
  // selection and the attention over it. Returns the attention output [1, Hq * d].
  at::Tensor attend(int layer, const LayerInput& in);
  // The rest of a decode layer: its output projection and MLP on the residual stream `sum`
  // [1, D] and the attention output `attn`, then the next layer's q/k/v (none after the last
  // layer, whose stream comes through the final norm). The same kernels at every step: under
  // cuda_graphs a layer's piece replays a CUDA graph (dense_graphed).
  LayerInput dense_after_attention(int layer, const at::Tensor& sum, const at::Tensor& attn,
                                   const RopeAngles& rope);
  LayerInput dense_graphed(int layer, const at::Tensor& sum, const at::Tensor& attn,
                           const RopeAngles& rope);
  bool graphs_on() const;
  // The RoPE angles of the decode position (position_), [1, r]; when `graphed`, held where
  // every layer's graph reads them (DecodeGraphs::fixed).
  RopeAngles step_rope(bool graphed);
  // Under cuda_graphs: every layer's dense piece captured at the end of prefill, after its
  // timing (timed in graph_capture_s alone), so that neither prefill_s nor a decode step pays.
  void capture_decode_graphs();
  at::Tensor decode_attention(int layer, const at::Tensor& q, const Selection& selection);
  // A decode phase since `start`: its time into *total (the clock's: the device's on a GPU),
  // the host's into *host_total.
  void add_phase(const PhaseClock::Mark& start, double* total, double* host_total);
  // Compares KV head `head`'s attended entries (logical indices of kv_, host) and its output
  // out_head [g, d] with full attention over the shadow copy. q_group: [g, d]. `lists`: the
  // KV head's one list, scored against the top-B keys of the group's summed attention, or one
  // per query head (a per-query-head selection), each scored against its own head's top-B and
  // the recall the mean of the group's.
  void measure_fidelity(int layer, int head, const at::Tensor& q_group,
                        const std::vector<std::vector<int64_t>>& lists, const at::Tensor& out_head);

  const LlamaModel& model_;
  Method& method_;
  SessionOptions options_;
  std::unique_ptr<ModelView> own_view_;  // when options_.model_view was null
  std::vector<LayerKV> kv_;
  std::vector<LayerKV> shadow_;  // uncompressed KV, only with track_fidelity
  FidelityCounts fidelity_;
  int64_t position_ = 0;
  AttendedTally tally_;
  EqualCountsIndptr all_rows_indptr_;  // Full's indptr, shared by a decode step's layers
  mutable AttendedCounts attended_;  // tally_ as last read
  SessionTimings timings_;
  PhaseClock clock_;  // times the phases into timings_ (CUDA events on a GPU)
  std::unique_ptr<DecodeGraphs> graphs_;  // under cuda_graphs, made by the first prefill
};

// Greedy argmax with ties to the lowest id. logits: [V] on any device (one value read back);
// a NaN among them is an InputError (no token is the pick).
int argmax_token(const at::Tensor& logits);

// The entries one decode step attends, as the attention kernels read them: pool rows per unit
// (a unit's KV head is unit / (units / Hkv)), on the pools' device.
struct AttendedRows {
  at::Tensor indptr;  // [units + 1] int64: unit u reads rows[indptr[u] .. indptr[u + 1])
  at::Tensor rows;    // int64 pool rows, [nnz]; or [units, n] (every unit n rows, unit u's in
                      // row u, which may be a view of a wider row table: reshape to flatten)
  int64_t longest = -1;              // the longest unit's count when known on the host, else -1
  std::vector<int64_t> host_counts;  // each unit's count when known on the host, else empty
  int64_t units() const { return indptr.size(0) - 1; }
};
// The rows of `selection`'s entries, in its order (`all`: every resident entry, one unit per KV
// head). Every entry of equally filled heads (Full's usual case) takes 1 device op and builds
// no entry lists, its indptr from `indptr` when given; of heads of different sizes, a view of
// the row table and one copy of the counts' indptr to the device.
AttendedRows attended_rows(const LayerKV& kv, const Selection& selection,
                           EqualCountsIndptr* indptr = nullptr);

// Decode attention of one layer over `attended`, any device and dtype: the rows gathered into
// [units, longest, d] (padding masked), scores and softmax in fp32. q: [Hq, d]. Returns out
// [Hq, d]; probs (when non-null) receives per unit [q/u, n_u].
at::Tensor gathered_decode_attention(const at::Tensor& q, const LayerKV& kv,
                                     const AttendedRows& attended, std::vector<at::Tensor>* probs);

// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kvb
