#include "harness/model/model_config.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "harness/common/error.h"

namespace kvb {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& field, const std::string& what) {
  throw InputError(path + ": field '" + field + "': " + what);
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

// model_type when it is one we run, else the first supported entry of "architectures".
std::string read_model_type(const Fields& f) {
  std::string type = f.find("model_type") ? f.string("model_type") : "";
  if (type == "llama" || type == "mistral" || type == "qwen2") return type;
  if (const json* archs = f.find("architectures"); archs && archs->is_array()) {
    for (const json& a : *archs) {
      if (a == "LlamaForCausalLM") return "llama";
      if (a == "MistralForCausalLM") return "mistral";
      if (a == "Qwen2ForCausalLM") return "qwen2";
    }
  }
  f.fail("model_type", "unsupported architecture '" + type + "' (supported: llama, mistral, qwen2)");
}

RopeScaling read_rope_scaling(const Fields& f, const std::string& path) {
  RopeScaling r;
  const json* v = f.find("rope_scaling");
  if (!v) return r;
  if (!v->is_object()) f.fail("rope_scaling", "must be an object or null");
  Fields rope(*v, path, "rope_scaling.");
  // Newer HF configs spell the kind "rope_type", older ones "type".
  std::string type = rope.string(rope.find("rope_type") ? "rope_type" : "type");
  if (type == "default") return r;
  if (type != "linear" && type != "llama3")
    rope.fail("rope_type", "unsupported '" + type + "' (supported: linear, llama3)");
  r.type = type;
  r.factor = rope.number("factor");
  if (!(r.factor > 0)) rope.fail("factor", "must be > 0");
  if (type != "llama3") return r;
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
  if (!(c.rms_norm_eps > 0)) fail(path, "rms_norm_eps", "must be > 0");
  if (!(c.rope_theta > 0)) fail(path, "rope_theta", "must be > 0");
}

const char* architecture_of(const std::string& model_type) {
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& path) {
  if (!j.is_object()) throw InputError(path + ": config must be a JSON object");
  Fields f(j, path);
  ModelConfig c;
  c.model_type = read_model_type(f);
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  c.vocab_size = f.integer("vocab_size");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  bool explicit_head_dim = f.find("head_dim") != nullptr;
  // A placeholder when heads <= 0: validate() rejects that before head_dim matters.
  int derived_head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.head_dim = f.integer("head_dim", derived_head_dim);
  c.rms_norm_eps = f.number("rms_norm_eps", c.rms_norm_eps);
  c.rope_theta = f.number("rope_theta", c.rope_theta);
  c.rope_scaling = read_rope_scaling(f, path);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  // Qwen2 always has q/k/v biases (its config has no switch); Llama/Mistral opt in.
  c.attention_bias = f.boolean("attention_bias", false) || c.model_type == "qwen2";
  c.bos_token_id = f.integer("bos_token_id", -1);
  c.eos_token_ids = f.integers("eos_token_id");
  validate(c, explicit_head_dim, path);
  return c;
}

ModelConfig ModelConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open model config");
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InputError(path + ": not valid JSON");
  return from_json(j, path);
}

json ModelConfig::to_json() const {
  json j = {{"model_type", model_type},
            {"architectures", {architecture_of(model_type)}},
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
            {"tie_word_embeddings", tie_word_embeddings},
            {"attention_bias", attention_bias},
            {"bos_token_id", bos_token_id >= 0 ? json(bos_token_id) : json(nullptr)}};
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
