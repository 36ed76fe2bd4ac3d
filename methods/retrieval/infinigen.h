// InfiniGen (Lee et al., OSDI 2024, https://www.usenix.org/conference/osdi24/presentation/lee;
// snu-comparch/InfiniGen). Speculative KV prefetching: offline, each layer's query/key space is
// rotated by an orthogonal "skewing" matrix A (from the SVD of calibration queries) so that a few
// channels carry most of q.k; at decode, layer i's attention input with layer i+1's query weights
// gives an approximate query for layer i+1, scored on those few channels of the skewed keys, and
// the keys within alpha of the best are fetched. The building blocks are exposed for the tests.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "methods/common/retrieval.h"

namespace kvb {

// Skewing matrices, one per KV head. q: [Hkv, Tq, d] (the group's post-RoPE calibration queries
// stacked), k: [Hkv, T, d] (post-RoPE calibration keys) -> A: [Hkv, d, d], orthogonal: the right
// singular vectors of Q (Vq) with columns ordered by descending Sq x Sk (i-th singular values of
// Q and K). Computed from the eigen-decomposition of the d x d Gram matrices in double precision.
at::Tensor infinigen_skewing(const at::Tensor& q, const at::Tensor& k);

// Partial channels per KV head: the union of the top max(1, int(d x r)) channels by sum |Q A|
// and the top max(1, int(d x r)) by sum |K A|, ascending. qa: [Hkv, Tq, d], ka: [Hkv, T, d]
// (already skewed). Returns Hkv int64 tensors.
std::vector<at::Tensor> infinigen_partial_channels(const at::Tensor& qa, const at::Tensor& ka,
                                                   double r);

// Every KV head's partial channels as one tensor: head h's c_h channels, then padding up to the
// widest head's c (repeating its first channel, or channel 0 for a head with none; the mask
// zeroes what the padding contributes).
struct InfiniGenChannels {
  at::Tensor ids;   // [Hkv, c] int64
  at::Tensor mask;  // [Hkv, 1, c] float32: 1 on head h's first c_h channels, 0 after
  int64_t total = 0;  // sum over heads of c_h (what the reference stores per cached key)
};
InfiniGenChannels infinigen_pad_channels(const std::vector<at::Tensor>& per_head);

// Keys [Hkv, L, d] (post-RoPE, any float dtype) in the skewed basis (k A, A = skew [Hkv, d, d])
// on each head's partial channels: [Hkv, L, c] float32 (padding columns hold head h's first
// channel).
at::Tensor infinigen_partial_keys(const at::Tensor& k, const at::Tensor& skew,
                                  const InfiniGenChannels& channels);

// The speculative scores of every KV head: the speculated queries q [Hq, d] (group h: rows
// h*g .. h*g+g-1) in the skewed basis on their head's partial channels, against the partial
// skewed keys [Hkv, n, c], / sqrt(d), summed over the group (specs/methods.md's rule for GQA,
// which the reference lacks), or with group_mean averaged. Returns [Hkv, n] float32.
at::Tensor infinigen_speculative_scores(const at::Tensor& q, const at::Tensor& skew,
                                        const InfiniGenChannels& channels,
                                        const at::Tensor& partial_keys, bool group_mean = false);

// InfiniGen's fetch count: per head, the keys whose speculative score is within alpha of that
// head's max (score >= max - alpha, as the reference), averaged over the heads and truncated
// (the reference fetches the same number for every head). scores: [H, n]. Returns an int64
// scalar on the scores' device: the host does not wait for it.
at::Tensor infinigen_threshold_count(const at::Tensor& scores, double alpha);

// The entries each head fetches: the current (last) one and the top fetch - 1 of the others by
// speculative score. scores: [H, n]; 1 <= fetch <= n. Returns [H, fetch] ascending, on the
// scores' device.
at::Tensor infinigen_fetch(const at::Tensor& scores, int64_t fetch);
// The same for a count on the device (an int64 scalar in 1..cap, cap <= n): [H, cap], whose
// first `fetch` entries per head are infinigen_fetch(scores, fetch)'s (the rest repeat the
// current entry), so a Selection of row prefixes attends them without the host reading fetch.
// Where scores tie across the fetch - 1'th place (NaNs tie too), topk over cap - 1 may take
// another of the tied entries than topk over fetch - 1, and on a GPU the kernel takes the
// lower indices: either is a top set (engine/kernel_adapter.h top_k_ascending_then_last).
at::Tensor infinigen_fetch_rows(const at::Tensor& scores, const at::Tensor& fetch, int64_t cap);

// The calibration text shipped with kvbench (methods/retrieval/infinigen_calibration.txt): used
// when `calibration_file` is empty.
std::string infinigen_default_calibration_file();

struct InfiniGenConfig {
  double alpha = 5.0;           // fetch keys with speculative score >= max - alpha (Llama: 5)
  double partial_ratio = 0.2;   // r: share of channels kept for speculation
  // "text": A from the first calibration_tokens of a calibration text (the reference: PG19's
  // first book), `calibration_file` or, when empty, infinigen_default_calibration_file();
  // "prompt": from the current prompt's first calibration_tokens (fits A to the input scored).
  std::string calibration = "text";
  std::string calibration_file;
  int64_t calibration_tokens = 2048;
  double budget_ratio = 0.0;     // > 0: cap = int(n x ratio) (the reference's `budget`); 0: B
  bool fill_to_budget = false;   // true: attend exactly the cap, top by speculative score
  // GQA (not in the reference): a KV head's score is its group's query scores' "sum" (the
  // spec's rule) or "mean" (kvbench's until 2026-12-01: alpha then keeps one head's scale).
  std::string gqa_score = "sum";

  static const ConfigFields<InfiniGenConfig>& fields();
  void check_budget(int64_t budget, const std::string& where) const;
  // The calibration text read when calibration == "text".
  std::string text_file() const;
  // The fetch cap of a head holding n entries: int(n x budget_ratio) or B, within [1, n].
  int64_t cap(int64_t budget, int64_t entries) const;
  // The budget rule: the threshold count, between 1 and the cap (exactly the cap with
  // fill_to_budget).
  AttendedRange attended(int64_t budget, int64_t entries, int64_t step) const;
};

// Where a calibration text's matrices are cached for `model` ("" when the run has no cache
// directory): <cache_dir>/infinigen-<weights hash>-<text hash>-<tokens>-<r>-<device>.safetensors.
class ModelView;
std::string infinigen_cache_path(const ModelView& model, const InfiniGenConfig& c);

// Per layer: skewing matrices and partial channels (from a calibration text or the prompt).
struct InfiniGenCalibration {
  std::vector<at::Tensor> skew;                   // per layer [Hkv, d, d] (undefined: dense)
  std::vector<std::vector<at::Tensor>> channels;  // per layer, per KV head [c_h] int64
};

class InfiniGen : public RetrievalMethod {
 public:
  static constexpr int kDenseLayers = 2;  // as the reference
  explicit InfiniGen(const InfiniGenConfig& c) : RetrievalMethod(kDenseLayers), config_(c) {}
  void begin(const MethodContext& context) override;
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  LayerKV& kv) override;
  void on_attention_input(int layer, const at::Tensor& x, int64_t position) override;
  void on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) override;

  // Last step's speculation, for inspection: entries over the threshold averaged over heads
  // (not counted under fill_to_budget, which fetches B whatever the count: 0 there). Reads the
  // device.
  int64_t last_count() const { return last_count_.defined() ? last_count_.item<int64_t>() : 0; }
  // The skewing matrices and partial channels in use (after begin, or on_prefill for "prompt").
  const InfiniGenCalibration& calibration() const {
    return file_calibration_ ? *file_calibration_ : prompt_calibration_;
  }

 protected:
  // B; with budget_ratio every head is sparse, its cap int(n x ratio) whatever B (the
  // reference's fetch_max = int(src_len x budget), on every prompt).
  int64_t attends_all_up_to() const override {
    return config_.budget_ratio > 0.0 ? 0 : context_.budget;
  }
  DeviceRows select_rows(int layer, const at::Tensor& q, const LayerKV& kv) override;

 private:
  // One layer's partial skewed keys, rows [0, n) of a buffer grown by a quarter when full (a
  // decode step writes one row in place instead of copying every head's keys).
  struct PartialKeys {
    InfiniGenChannels channels;
    at::Tensor buffer;  // [Hkv, capacity, c] float32
    int64_t n = 0;
    at::Tensor keys() const { return buffer.narrow(1, 0, n); }  // [Hkv, n, c]
  };
  void set_partial_bytes(int layer, const LayerKV& kv);

  InfiniGenConfig config_;
  std::shared_ptr<const InfiniGenCalibration> file_calibration_;  // from a calibration text
  InfiniGenCalibration prompt_calibration_;                       // from the prompt
  std::vector<PartialKeys> partial_;                   // per layer (empty buffer: dense)
  std::vector<at::Tensor> attention_input_;            // per layer, this step's x: [1, D]
  int64_t position_ = 0;
  at::Tensor last_count_;  // int64 scalar on the device (undefined: none counted)
};

}  // namespace kvb
