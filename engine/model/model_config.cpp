#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& field, const std::string& what) {
  throw InputError(path + ": field '" + field + "': " + what);
}

std::string number_text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// Typed access to the fields of one JSON object, every error naming the file and the field
// (with `prefix`, e.g. "rope_scaling.", for nested objects).
class Fields {
 public:
  Fields(const json& j, const std::string& path, std::string prefix = "")
      : j_(j), path_(path), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    kvb::fail(path_, prefix_ + field, what);
  }

  // HF writes null for many unset fields ("rope_scaling": null, "head_dim": null): same as absent.
  const json* find(const char* field) const {
    auto it = j_.find(field);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  // Whether the file has the key at all, null included (where a class default applies only to
  // an absent key).
  bool written(const char* field) const { return j_.contains(field); }

  int integer(const char* field) const { return to_int(required(field), field); }
  int integer(const char* field, int fallback) const {
    const json* v = find(field);
    return v ? to_int(*v, field) : fallback;
  }
  // eos_token_id: an int or a list of ints.
  std::vector<int> integers(const char* field) const {
    const json* v = find(field);
    if (!v) return {};
    if (!v->is_array()) return {to_int(*v, field)};
    std::vector<int> out;
    for (const json& x : *v) out.push_back(to_int(x, field));
    return out;
  }

  double number(const char* field) const { return to_double(required(field), field); }
  double number(const char* field, double fallback) const {
    const json* v = find(field);
    return v ? to_double(*v, field) : fallback;
  }

  bool boolean(const char* field, bool fallback) const {
    const json* v = find(field);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(field, "must be a boolean (got " + type_of(*v) + ")");
    return v->get<bool>();
  }

  std::string string(const char* field) const {
    const json& v = required(field);
    if (!v.is_string()) fail(field, "must be a string (got " + type_of(v) + ")");
    return v.get<std::string>();
  }
  std::string string(const char* field, const std::string& fallback) const {
    return find(field) ? string(field) : fallback;
  }

  // Fails on a key outside `known`, naming it.
  void only(const std::vector<std::string>& known, const std::string& context) const {
    for (const auto& item : j_.items())
      if (std::find(known.begin(), known.end(), item.key()) == known.end())
        fail(item.key(), "not understood " + context);
  }

 private:
  static std::string type_of(const json& v) { return v.type_name(); }

  const json& required(const char* field) const {
    const json* v = find(field);
    if (!v) fail(field, "missing");
    return *v;
  }

  int to_int(const json& v, const char* field) const {
    if (!v.is_number_integer()) fail(field, "must be an integer (got " + type_of(v) + ")");
    bool out_of_range = v.is_number_unsigned()
                            ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max())
                            : v.get<int64_t>() < std::numeric_limits<int>::min() ||
                                  v.get<int64_t>() > std::numeric_limits<int>::max();
    if (out_of_range) fail(field, "out of range");
    return v.get<int>();
  }

  double to_double(const json& v, const char* field) const {
    if (!v.is_number()) fail(field, "must be a number (got " + type_of(v) + ")");
    return v.get<double>();
  }

  const json& j_;
  const std::string& path_;
  std::string prefix_;
};

// The architectures kvbench implements: model_type and the transformers class of each.
const std::map<std::string, std::string>& architectures() {
  static const std::map<std::string, std::string> table = {
      {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
      {"glm", "GlmForCausalLM"}};
  return table;
}

std::string supported_list() {
  std::string out;
  for (const auto& [type, cls] : architectures()) out += (out.empty() ? "" : ", ") + type;
  return out;
}

// model_type when it is one we run, else the first supported entry of "architectures".
std::string read_model_type(const Fields& f) {
  if (const json* archs = f.find("architectures"); archs && !archs->is_null()) {
    const bool names = archs->is_array() && std::all_of(archs->begin(), archs->end(),
                                                        [](const json& a) { return a.is_string(); });
    if (!names) f.fail("architectures", archs->dump() + ": expected a list of class names");
  }
  std::string type = f.string("model_type", "");
  if (architectures().count(type)) return type;
  if (const json* archs = f.find("architectures"); archs && type.empty()) {
    if (archs->is_array())
      for (const json& a : *archs)
        for (const auto& [t, cls] : architectures())
          if (a == cls) return t;
    std::string classes;
    for (const auto& [t, cls] : architectures()) classes += (classes.empty() ? "" : ", ") + cls;
    f.fail("architectures", archs->dump() + " names no supported class (supported: " + classes +
                                ") and there is no model_type");
  }
  f.fail("model_type", "unsupported architecture '" + type + "' (supported: " + supported_list() + ")");
}

// What transformers' config class of `model_type` assumes for a key the file leaves out, where
// that differs from Llama's (<= 0: Llama's rule, num_attention_heads or hidden / heads).
struct ClassDefaults {
  int kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  std::vector<int> eos_token_ids;
};

ClassDefaults class_defaults(const std::string& model_type) {
  if (model_type == "mistral") return {8, 0, 1e-6, {}};
  if (model_type == "qwen2") return {32, 0, 1e-6, {}};
  if (model_type == "qwen3") return {32, 128, 1e-6, {}};
  if (model_type == "glm") return {2, 128, 1.5625e-07, {151329, 151336, 151338}};
  return {};
}

// ---- config keys -------------------------------------------------------------------------

const std::vector<ConfigKey>& key_table() {
  static const std::vector<ConfigKey> table = {
      // Read: implemented, or refused by value.
      {"model_type", true, "selects the architecture (llama, mistral, qwen2, qwen3, glm)"},
      {"architectures", true, "selects the architecture when model_type is absent"},
      {"hidden_size", true, "model width"},
      {"intermediate_size", true, "MLP width"},
      {"num_hidden_layers", true, "layers"},
      {"num_attention_heads", true, "query heads"},
      {"num_key_value_heads", true, "KV heads (GQA); defaults to num_attention_heads"},
      {"head_dim", true, "per-head width; defaults to hidden_size / num_attention_heads"},
      {"vocab_size", true, "embedding rows"},
      {"max_position_embeddings", true, "required; not enforced on context lengths (transformers does not either)"},
      {"rms_norm_eps", true, "RMSNorm epsilon"},
      {"rope_theta", true, "RoPE base (transformers < 5)"},
      {"rope_scaling", true, "RoPE scaling (transformers < 5): default, linear, llama3; others refused"},
      {"rope_parameters", true, "RoPE base and scaling (transformers >= 5); must agree with the older keys"},
      {"partial_rotary_factor", true, "GLM: share of each head RoPE turns (also inside rope_parameters); != 1 refused elsewhere"},
      {"tie_word_embeddings", true, "LM head = embedding; a differing lm_head.weight is refused"},
      {"attention_bias", true, "q/k/v (and, for llama/qwen3, o_proj) biases; refused for mistral"},
      {"mlp_bias", true, "must be false"},
      {"hidden_act", true, "must be silu (SwiGLU)"},
      {"sliding_window", true, "contexts longer than the window are refused (not implemented)"},
      {"use_sliding_window", true, "qwen2/qwen3: whether sliding_window applies"},
      {"max_window_layers", true, "qwen2/qwen3: layers from this index slide when use_sliding_window"},
      {"layer_types", true, "full_attention, or sliding_attention (then as sliding_window)"},
      {"bos_token_id", true, "BOS id"},
      {"eos_token_id", true, "EOS ids (an int or a list) that end generation"},
      {"is_encoder_decoder", true, "must be false"},
      {"add_cross_attention", true, "must be false"},
      // Known not to change greedy inference.
      {"transformers_version", false, "bookkeeping"},
      {"_name_or_path", false, "bookkeeping"},
      {"torch_dtype", true, "storage dtype, a torch dtype name; kvbench computes in --dtype"},
      {"dtype", true, "storage dtype (transformers >= 5); must agree with torch_dtype"},
      {"use_cache", false, "kvbench always caches KV"},
      {"initializer_range", false, "training only"},
      {"attention_dropout", false, "training only (no dropout at inference)"},
      {"hidden_dropout", false, "training only"},
      {"resid_pdrop", false, "training only"},
      {"embd_pdrop", false, "training only"},
      {"pretraining_tp", false, "splits the same matrix products across devices"},
      {"pad_token_id", false, "padding; kvbench runs one sequence at a time"},
      {"sep_token_id", false, "not used by decoder-only generation"},
      {"decoder_start_token_id", false, "encoder-decoder models only"},
      {"output_attentions", false, "what transformers returns, not what it computes"},
      {"output_hidden_states", false, "what transformers returns"},
      {"return_dict", false, "what transformers returns"},
      {"use_return_dict", false, "what transformers returns"},
      {"torchscript", false, "export setting"},
      {"id2label", false, "classification heads only"},
      {"label2id", false, "classification heads only"},
      {"num_labels", false, "classification heads only"},
      {"problem_type", false, "classification heads only"},
      {"finetuning_task", false, "bookkeeping"},
      {"task_specific_params", false, "pipeline defaults"},
      {"tokenizer_class", false, "the tokenizer comes from tokenizer.json"},
      {"prefix", false, "pipeline prompt prefix"},
      {"chunk_size_feed_forward", false, "memory chunking of the same product"},
      {"tie_encoder_decoder", false, "encoder-decoder models only"},
      {"_attn_implementation_autoset", false, "attention kernel choice, same math"},
      {"attn_implementation", false, "attention kernel choice, same math"},
      // Generation defaults: kvbench decodes greedily and states its own stopping rule.
      {"max_length", false, "generation default; kvbench sets its own lengths"},
      {"min_length", false, "generation default"},
      {"do_sample", false, "generation default; kvbench decodes greedily"},
      {"early_stopping", false, "beam search only"},
      {"num_beams", false, "beam search only"},
      {"num_beam_groups", false, "beam search only"},
      {"diversity_penalty", false, "beam search only"},
      {"temperature", false, "sampling only"},
      {"top_k", false, "sampling only"},
      {"top_p", false, "sampling only"},
      {"typical_p", false, "sampling only"},
      {"repetition_penalty", false, "generation default; kvbench decodes greedily"},
      {"length_penalty", false, "beam search only"},
      {"no_repeat_ngram_size", false, "generation default"},
      {"encoder_no_repeat_ngram_size", false, "encoder-decoder only"},
      {"bad_words_ids", false, "generation default"},
      {"num_return_sequences", false, "generation default"},
      {"output_scores", false, "what generate returns"},
      {"return_dict_in_generate", false, "what generate returns"},
      {"forced_bos_token_id", false, "generation default"},
      {"forced_eos_token_id", false, "generation default"},
      {"remove_invalid_values", false, "generation default"},
      {"exponential_decay_length_penalty", false, "generation default"},
      {"suppress_tokens", false, "generation default"},
      {"begin_suppress_tokens", false, "generation default"},
      {"tf_legacy_loss", false, "training only"},
      {"use_bfloat16", false, "storage dtype"},
      {"cross_attention_hidden_size", false, "encoder-decoder only"},
      {"is_decoder", false, "decoder-only models are decoders"},
  };
  return table;
}

// Fails on (or, allowed, lists) the keys neither read nor known to be inert.
std::vector<std::string> check_keys(const json& j, const std::string& path, bool allow_unknown) {
  const auto is_known = [](const std::string& key) {
    const auto& table = key_table();
    return std::any_of(table.begin(), table.end(), [&](const ConfigKey& k) { return k.key == key; });
  };
  return unknown_config_keys(j, path, is_known, "the model's math", allow_unknown);
}

// ---- rope ---------------------------------------------------------------------------------

// The rope settings one form of config.json states.
struct Rope {
  double theta = 10000.0;
  RopeScaling scaling;
  double partial_rotary_factor = -1;  // < 0: not stated (only rope_parameters may state it)
};

std::string describe(const Rope& r) {
  std::string s = "rope_theta " + number_text(r.theta) + ", type " + r.scaling.type;
  if (r.scaling.type != "none") s += ", factor " + number_text(r.scaling.factor);
  if (r.scaling.type == "llama3")
    s += ", low_freq_factor " + number_text(r.scaling.low_freq_factor) + ", high_freq_factor " +
         number_text(r.scaling.high_freq_factor) + ", original_max_position_embeddings " +
         std::to_string(r.scaling.original_max_position_embeddings);
  return s;
}

// The kind of rope an object states: "rope_type" or, in older files, "type" (both: equal).
// An empty `fallback` makes it required.
std::string rope_type(const Fields& rope, const std::string& fallback) {
  const bool both = rope.find("rope_type") && rope.find("type");
  const char* key = rope.find("rope_type") ? "rope_type" : "type";
  const std::string type = fallback.empty() ? rope.string(key) : rope.string(key, fallback);
  if (both && rope.string("type") != type)
    rope.fail("type", "\"" + rope.string("type") + "\" disagrees with rope_type \"" + type + "\"");
  return type;
}

// The scaling of a rope_scaling or rope_parameters object; `form_keys` are the keys the object
// may hold besides those of its type (each read by the caller).
RopeScaling read_scaling(const Fields& rope, const std::string& type,
                         const std::vector<std::string>& form_keys) {
  RopeScaling r;
  auto allow = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), form_keys.begin(), form_keys.end());
    rope.only(extra, "for rope_type '" + type + "'");
  };
  if (type == "default") {
    allow({});
    return r;
  }
  if (type != "linear" && type != "llama3")
    rope.fail(rope.find("rope_type") ? "rope_type" : "type",
              "unsupported '" + type + "': not implemented, so refused rather than "
              "approximated (supported: default, linear, llama3)");
  r.type = type;
  r.factor = rope.number("factor");
  if (!(r.factor > 0)) rope.fail("factor", "must be > 0");
  if (type == "linear") {
    allow({"factor"});
    return r;
  }
  allow({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
  r.low_freq_factor = rope.number("low_freq_factor");
  r.high_freq_factor = rope.number("high_freq_factor");
  r.original_max_position_embeddings = rope.integer("original_max_position_embeddings");
  // The llama3 formula interpolates over 1 / (high - low) and measures wavelengths against
  // the original context, so both must be positive.
  if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor))
    rope.fail("high_freq_factor", "needs 0 < low_freq_factor < high_freq_factor");
  if (r.original_max_position_embeddings <= 0)
    rope.fail("original_max_position_embeddings", "must be > 0");
  return r;
}

const json& rope_object(const Fields& f, const char* field) {
  const json* v = f.find(field);
  if (!v->is_object()) f.fail(field, "must be an object or null");
  return *v;
}

// transformers < 5: top-level rope_theta and rope_scaling.
Rope read_legacy_rope(const Fields& f, const std::string& path) {
  Rope r;
  r.theta = f.number("rope_theta", r.theta);
  if (!f.find("rope_scaling")) return r;
  Fields rope(rope_object(f, "rope_scaling"), path, "rope_scaling.");
  r.scaling = read_scaling(rope, rope_type(rope, ""), {"rope_type", "type"});
  return r;
}

// transformers >= 5: everything inside rope_parameters.
Rope read_rope_parameters(const Fields& f, const std::string& path) {
  Fields rope(rope_object(f, "rope_parameters"), path, "rope_parameters.");
  Rope r;
  r.theta = rope.number("rope_theta", r.theta);
  r.partial_rotary_factor = rope.number("partial_rotary_factor", -1);
  r.scaling = read_scaling(rope, rope_type(rope, "default"),
                           {"rope_type", "type", "rope_theta", "partial_rotary_factor"});
  return r;
}

// Both forms when both are present (they must agree), else whichever is there; the top-level
// partial_rotary_factor (any transformers version) must agree with one in rope_parameters.
Rope read_rope(const Fields& f, const std::string& path) {
  const bool modern = f.find("rope_parameters"), legacy = f.find("rope_theta") || f.find("rope_scaling");
  Rope rope = modern ? read_rope_parameters(f, path) : read_legacy_rope(f, path);
  if (modern && legacy) {
    const Rope old = read_legacy_rope(f, path);
    if (old.theta != rope.theta || !(old.scaling == rope.scaling))
      fail(path, "rope_parameters", "disagrees with rope_theta/rope_scaling (" + describe(rope) +
                                        " vs " + describe(old) + "); keep one of the two");
  }
  const double top = f.number("partial_rotary_factor", -1);
  if (top >= 0 && rope.partial_rotary_factor >= 0 && top != rope.partial_rotary_factor)
    fail(path, "partial_rotary_factor", number_text(top) + " disagrees with rope_parameters."
                                        "partial_rotary_factor " + number_text(rope.partial_rotary_factor));
  if (top >= 0) rope.partial_rotary_factor = top;
  return rope;
}

// ---- what the architecture implements ------------------------------------------------------

void read_rope_into(ModelConfig& c, const Fields& f, const std::string& path) {
  Rope rope = read_rope(f, path);
  c.rope_theta = rope.theta;
  c.rope_scaling = rope.scaling;
  // GlmConfig's default is 0.5; every other architecture turns the whole head.
  const double fallback = c.model_type == "glm" ? 0.5 : 1.0;
  c.partial_rotary_factor = rope.partial_rotary_factor >= 0 ? rope.partial_rotary_factor : fallback;
  if (c.model_type != "glm" && c.partial_rotary_factor != 1.0)
    fail(path, "partial_rotary_factor", "only glm implements partial rotary embeddings (got " +
                                            number_text(c.partial_rotary_factor) + ")");
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    fail(path, "partial_rotary_factor", "must be in (0, 1]");
}

// Which biases the attention has, as each transformers class builds it.
void read_biases(ModelConfig& c, const Fields& f, const std::string& path) {
  const std::string& t = c.model_type;
  const bool asked = f.boolean("attention_bias", t == "glm");
  if (t == "qwen2") {
    c.attention_bias = true;  // Qwen2Attention: q/k/v biases always, never on o_proj
  } else if (t == "glm") {
    c.attention_bias = asked;  // GlmAttention: o_proj never has one
  } else if (t == "mistral") {
    if (asked) fail(path, "attention_bias", "true is not implemented for mistral");
  } else {
    c.attention_bias = c.output_bias = asked;  // Llama, Qwen3: q, k, v and o_proj
  }
  if (f.boolean("mlp_bias", false)) fail(path, "mlp_bias", "true is not implemented (MLP biases)");
}

// Whether `layer_types` (absent: none) names a sliding layer; refuses a malformed list.
bool any_sliding_layer(const ModelConfig& c, const Fields& f, const std::string& path) {
  const json* types = f.find("layer_types");
  if (!types) return false;
  if (!types->is_array() || int(types->size()) != c.num_hidden_layers)
    fail(path, "layer_types", "must be a list of num_hidden_layers strings");
  bool sliding = false;
  for (const json& t : *types) {
    if (t == "sliding_attention") sliding = true;
    else if (t != "full_attention")
      fail(path, "layer_types", "unsupported layer type " + t.dump() +
                                    " (supported: full_attention, sliding_attention)");
  }
  return sliding;
}

// The window of the sliding layers, 0 when no layer slides, as each transformers class decides.
int read_sliding_window(const ModelConfig& c, const Fields& f, const std::string& path) {
  const int window = f.integer("sliding_window", 0);
  if (f.find("sliding_window") && window <= 0) fail(path, "sliding_window", "must be > 0 or null");
  const bool sliding_layers = any_sliding_layer(c, f, path);
  // MistralAttention slides on every layer (MistralConfig has no layer_types: a list is
  // unused); the window is 4096 where the key is absent (null: none).
  if (c.model_type == "mistral") return f.written("sliding_window") ? window : 4096;
  if (c.model_type == "qwen2" || c.model_type == "qwen3") {
    // Qwen2Config/Qwen3Config: no window at all unless use_sliding_window, then 4096 where the
    // key is absent (null: none); the sliding layers are layer_types' where it is given, else
    // those from max_window_layers on.
    if (!f.boolean("use_sliding_window", false)) return 0;
    const int w = f.written("sliding_window") ? window : 4096;
    if (f.find("layer_types")) return sliding_layers ? w : 0;
    return f.integer("max_window_layers", 28) < c.num_hidden_layers ? w : 0;
  }
  if (window > 0 || sliding_layers)
    fail(path, window > 0 ? "sliding_window" : "layer_types",
         c.model_type + " has no sliding-window attention in transformers; remove the key or "
                        "set it to null");
  return 0;
}

// config.json's storage dtype ("torch_dtype", "dtype" since transformers 5): kvbench reads each
// tensor's dtype from the safetensors header, so the value changes nothing, but a value that
// is no torch dtype (transformers' getattr(torch, name) would fail on it) is refused rather
// than read without being understood, as are the two keys disagreeing.
void check_storage_dtype(const Fields& f) {
  static const std::set<std::string> torch_names = {
      "float32", "float", "float64", "double", "float16", "half", "bfloat16", "float8_e4m3fn",
      "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "uint8",
      "int16", "short", "int32", "int", "int64", "long", "uint16", "uint32", "uint64", "bool",
      "complex64", "cfloat", "complex128", "cdouble"};
  std::string stated;
  for (const char* field : {"torch_dtype", "dtype"}) {
    if (!f.find(field)) continue;
    const std::string name = f.string(field);
    if (!torch_names.count(name))
      f.fail(field, "'" + name + "' is no torch dtype name (float32, float16, bfloat16, ...)");
    if (!stated.empty() && name != stated)
      f.fail(field, "'" + name + "' disagrees with torch_dtype '" + stated + "'");
    stated = name;
  }
}

void require_value(const Fields& f, const char* field, bool must_be) {
  if (f.boolean(field, must_be) != must_be)
    f.fail(field, std::string("must be ") + (must_be ? "true" : "false") + " (not implemented)");
}

void validate(const ModelConfig& c, bool explicit_head_dim, const std::string& path) {
  const std::pair<const char*, int> sizes[] = {
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [field, value] : sizes)
    if (value <= 0) fail(path, field, "must be > 0 (got " + std::to_string(value) + ")");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(path, "num_key_value_heads", "must divide num_attention_heads (" +
                                          std::to_string(c.num_attention_heads) + ")");
  if (!explicit_head_dim && c.hidden_size % c.num_attention_heads != 0)
    fail(path, "hidden_size", "must be a multiple of num_attention_heads unless head_dim is set");
  if (c.head_dim % 2 != 0) fail(path, "head_dim", "must be even (RoPE turns pairs)");
  if (c.rotary_dim() % 2 != 0 || c.rotary_dim() <= 0)
    fail(path, "partial_rotary_factor", "head_dim * factor must be a positive even number");
  if (!(c.rms_norm_eps > 0)) fail(path, "rms_norm_eps", "must be > 0");
  if (!(c.rope_theta > 0)) fail(path, "rope_theta", "must be > 0");
}

}  // namespace

bool RopeScaling::operator==(const RopeScaling& o) const {
  if (type != o.type) return false;
  if (type == "none") return true;
  if (factor != o.factor) return false;
  return type != "llama3" ||
         (low_freq_factor == o.low_freq_factor && high_freq_factor == o.high_freq_factor &&
          original_max_position_embeddings == o.original_max_position_embeddings);
}

int ModelConfig::rotary_dim() const { return int(head_dim * partial_rotary_factor); }

const std::vector<ConfigKey>& config_key_table() { return key_table(); }

std::string unknown_key_warning(const std::string& config_path, const std::string& key) {
  return config_path + ": unknown key '" + key + "' ignored (--allow-unknown-config-keys)";
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& path, bool allow_unknown_keys) {
  if (!j.is_object()) throw InputError(path + ": config must be a JSON object");
  Fields f(j, path);
  ModelConfig c;
  c.model_type = read_model_type(f);
  c.unknown_keys = check_keys(j, path, allow_unknown_keys);
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  const ClassDefaults defaults = class_defaults(c.model_type);
  // The class's default where the key is absent; null means num_attention_heads in every class
  // but GlmConfig, which keeps the null (its attention cannot then be built).
  if (c.model_type == "glm" && f.written("num_key_value_heads") && !f.find("num_key_value_heads"))
    f.fail("num_key_value_heads", "null is not accepted for glm (give the number)");
  c.num_key_value_heads = f.integer(
      "num_key_value_heads", defaults.kv_heads > 0 && !f.written("num_key_value_heads")
                                 ? defaults.kv_heads
                                 : c.num_attention_heads);
  c.vocab_size = f.integer("vocab_size");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  bool explicit_head_dim = f.find("head_dim") != nullptr || defaults.head_dim > 0;
  // A placeholder when heads <= 0: validate() rejects that before head_dim matters.
  int derived_head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.head_dim = f.integer("head_dim", defaults.head_dim > 0 ? defaults.head_dim : derived_head_dim);
  c.rms_norm_eps = f.number("rms_norm_eps", defaults.rms_norm_eps);
  read_rope_into(c, f, path);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  read_biases(c, f, path);
  // transformers' ACT2FN maps "swish" to the same SiLU.
  if (const std::string act = f.string("hidden_act", "silu"); act != "silu" && act != "swish")
    f.fail("hidden_act", "unsupported '" + act + "' (supported: silu, swish)");
  require_value(f, "is_encoder_decoder", false);
  require_value(f, "add_cross_attention", false);
  check_storage_dtype(f);
  c.sliding_window = read_sliding_window(c, f, path);
  c.bos_token_id = f.integer("bos_token_id", -1);
  c.eos_token_ids = f.find("eos_token_id") ? f.integers("eos_token_id") : defaults.eos_token_ids;
  // Ids the file states must be tokens (vocab_size <= 0 is validate()'s to refuse).
  const auto in_vocab = [&](int id) { return c.vocab_size <= 0 || (id >= 0 && id < c.vocab_size); };
  if (f.find("bos_token_id") && !in_vocab(c.bos_token_id))
    f.fail("bos_token_id", std::to_string(c.bos_token_id) + " is outside the vocabulary [0, " +
                               std::to_string(c.vocab_size) + ")");
  for (int id : f.find("eos_token_id") ? c.eos_token_ids : std::vector<int>{})
    if (!in_vocab(id))
      f.fail("eos_token_id", std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(c.vocab_size) + ")");
  validate(c, explicit_head_dim, path);
  return c;
}

ModelConfig ModelConfig::load(const std::string& path, bool allow_unknown_keys) {
  // read_json_file: a FIFO or a link loop refused, a parse error with its line and column.
  return from_json(read_json_file(path), path, allow_unknown_keys);
}

json ModelConfig::to_json() const {
  json j = {{"model_type", model_type},
            {"architectures", {architectures().at(model_type)}},
            {"hidden_size", hidden_size},
            {"intermediate_size", intermediate_size},
            {"num_hidden_layers", num_hidden_layers},
            {"num_attention_heads", num_attention_heads},
            {"num_key_value_heads", num_key_value_heads},
            {"head_dim", head_dim},
            {"vocab_size", vocab_size},
            {"max_position_embeddings", max_position_embeddings},
            {"rms_norm_eps", rms_norm_eps},
            {"rope_theta", rope_theta},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", tie_word_embeddings},
            {"bos_token_id", bos_token_id >= 0 ? json(bos_token_id) : json(nullptr)}};
  if (model_type != "qwen2") j["attention_bias"] = attention_bias;
  if (model_type == "glm") j["partial_rotary_factor"] = partial_rotary_factor;
  if (sliding_window > 0) {  // every layer slides: the engine refuses longer contexts anyway
    j["sliding_window"] = sliding_window;
    if (model_type != "mistral") {
      j["use_sliding_window"] = true;
      j["max_window_layers"] = 0;
    }
  } else if (model_type == "mistral") {
    j["sliding_window"] = nullptr;  // absent, MistralConfig would slide at 4096
  }
  if (rope_scaling.type == "none") {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {{"rope_type", rope_scaling.type}, {"factor", rope_scaling.factor}};
    if (rope_scaling.type == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = rope_scaling.low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = rope_scaling.high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] =
          rope_scaling.original_max_position_embeddings;
    }
  }
  if (eos_token_ids.size() == 1)
    j["eos_token_id"] = eos_token_ids[0];
  else if (!eos_token_ids.empty())
    j["eos_token_id"] = eos_token_ids;
  return j;
}

}  // namespace kvb
