// The extension point: a KV-cache compression method is one class implementing these hooks.
// The engine calls them per layer; the runner and the engine never name a method.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/common/registry.h"
#include "harness/engine/kv_store.h"

namespace kvb {

using json = nlohmann::json;

struct LlamaModel;

// What a method knows about the model and the sequence it runs on.
struct MethodContext {
  int num_layers = 0;
  int num_heads = 0;     // Hq
  int num_kv_heads = 0;  // Hkv
  int head_dim = 0;      // d
  int64_t budget = 0;    // B: KV entries attended per KV head per layer per decode step (0 = none)
  int64_t prompt_length = 0;
  uint64_t seed = 0;
  // The model's weights, read-only (InfiniGen speculates the next layer's queries with them).
  const LlamaModel* model = nullptr;
  int group_size() const { return num_heads / num_kv_heads; }  // g = Hq / Hkv
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
  // The longest unit's count when known on the host without reading the device (-1: not known).
  int64_t max_count = -1;

  static Selection everything() { return Selection{}; }
  // One list per unit, from the host; the tensors are placed on `device`.
  static Selection from_lists(const std::vector<std::vector<int64_t>>& lists,
                              bool per_query_head, at::Device device);
  // Every unit attends k entries: rows [units, k] int64 (any device), no host round trip.
  static Selection from_rows(const at::Tensor& rows, bool per_query_head);

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
  // methods that evict across layers while decoding (KV-Compress's continual compression).
  virtual void on_decode_step(std::vector<LayerKV>& layers) {}

  // Decode step: the attention input of `layer` (after its RMSNorm), x: [1, D], before its
  // q/k/v projections. Called for every layer before that layer's on_append/select.
  virtual void on_attention_input(int layer, const at::Tensor& x, int64_t position) {}

  // A decode token's k, v ([Hkv, d], post-RoPE) were just appended to `kv`.
  virtual void on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) {}

  // Decode step: which entries to attend to. q: [Hq, d] (post-RoPE). The current token is
  // resident already (appended just before) and must be in the selection.
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

  // The method's own counters for the sequence so far (e.g. bytes a GPU deployment would
  // fetch, cache hits, index bytes), as name -> value; the runner stores their mean over a
  // cell's samples as cell metrics.
  virtual std::map<std::string, double> counters() const { return {}; }

 protected:
  MethodContext context_;
};

// The fewest and the most entries one KV head of a sparse layer attends at a decode step.
struct AttendedRange {
  double fewest = 0, most = 0;
};

// A named config that reproduces one reference implementation's defaults.
struct MethodPreset {
  std::string name;         // e.g. "kvpress": used as "snapkv:kvpress"
  std::string description;  // the reference repository and file it follows, and what it sets
  json config;              // the fields it sets; the method's defaults fill the rest
};

// How the registry describes a method (shown by `kvbench list methods`).
struct MethodInfo {
  std::string name;      // suite name, e.g. "snapkv"
  std::string title;     // e.g. "SnapKV (Li et al. 2024)"
  std::string paper;     // URL
  std::string family;    // "baseline", "eviction", "retrieval"
  bool uses_budget = true;
  // How far the measured attended entries per (layer, KV head) may sit from B at the first
  // decode step, averaged, and why (block-wise eviction, rounding in a per-head allocation).
  double budget_tolerance = 0.0;
  // The method's own budget rule, for methods whose reference does not attend exactly B per KV
  // head of a sparse layer (recent tokens on top of B, whole pages only, a data-dependent
  // count): the range attended given the normalised config, B, the entries resident (n > B,
  // the current one included) and the decode step (1 = the first). Unset: exactly B.
  // Filled by make_method_info from `Config::attended(budget, entries, step)` when it exists.
  std::function<AttendedRange(const json& config, int64_t budget, int64_t entries, int64_t step)>
      attended;
  // Layers the method keeps dense by design (attend to everything); reported, not hidden.
  int dense_layers = 0;
  std::string fidelity;  // what it follows, and where it is not (yet) faithful
  // Named configs reproducing a reference's defaults, usable as "<name>:<preset>" wherever a
  // method name is (suites, --set method=, generate --method); declared in the method's file.
  std::vector<MethodPreset> presets;
  // Validates `config` (defaults filled in) and returns it normalised; throws InputError
  // naming `where` and the field.
  std::function<json(const json& config, const std::string& where)> normalise_config;
  // Checks a normalised config against one budget (e.g. window <= budget), before any model
  // is loaded; InputError naming `where` and the field.
  std::function<void(const json& config, int64_t budget, const std::string& where)> check_budget;
  // Builds the method from a normalised config.
  std::function<std::unique_ptr<Method>(const json& config)> create;

  int sort_key() const { return family == "baseline" ? 0 : family == "eviction" ? 1 : 2; }
};

// Registry of methods. Order in listings: baselines, eviction, retrieval.
Registry<MethodInfo>& method_registry();

// A method name or "<method>:<preset>" resolved against the registry, with its config.
struct MethodChoice {
  const MethodInfo* info = nullptr;
  std::string preset;  // empty: the method's own defaults
  json config;         // normalised: the preset's fields, then `config`'s on top, then defaults
};
// InputError at `where` for an unknown method or preset (listing the known ones) or a bad
// config; the config's own errors name `config_where`.
MethodChoice resolve_method(const std::string& name, const json& config, const std::string& where,
                            const std::string& config_where);

// Whether a config type declares its method's budget rule: AttendedRange attended(B, n, step).
template <typename C, typename = void>
struct has_attended_rule : std::false_type {};
template <typename C>
struct has_attended_rule<C, std::void_t<decltype(std::declval<const C&>().attended(
                                int64_t(), int64_t(), int64_t()))>> : std::true_type {};

// Registers a method whose config type `Config` provides
//   static Config from_json(const json&, const std::string& where)  (validates)
//   json to_json() const
//   void check_budget(int64_t budget, const std::string& where) const
//   AttendedRange attended(int64_t budget, int64_t entries, int64_t step) const  (optional)
// and whose class has a constructor taking `const Config&`.
template <typename MethodClass, typename Config>
MethodInfo make_method_info(MethodInfo info) {
  info.normalise_config = [](const json& config, const std::string& where) {
    return Config::from_json(config, where).to_json();
  };
  info.check_budget = [](const json& config, int64_t budget, const std::string& where) {
    Config::from_json(config, where).check_budget(budget, where);
  };
  if constexpr (has_attended_rule<Config>::value)
    info.attended = [](const json& config, int64_t budget, int64_t entries, int64_t step) {
      return Config::from_json(config, "config").attended(budget, entries, step);
    };
  info.create = [](const json& config) -> std::unique_ptr<Method> {
    return std::make_unique<MethodClass>(Config::from_json(config, "config"));
  };
  return info;
}

// The one registration line of a method's .cpp.
#define KVB_REGISTER_METHOD(...)                                                      \
  static const bool KVB_CONCAT(kvb_method_registered_, __LINE__) = [] {               \
    ::kvb::method_registry().add(__VA_ARGS__);                               \
    return true;                                                                      \
  }()

}  // namespace kvb
