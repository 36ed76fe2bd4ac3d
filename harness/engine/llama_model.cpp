#include "harness/engine/llama_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>

#include "harness/common/error.h"
#include "harness/common/json_fields.h"
#include "harness/model/safetensors.h"

namespace kvb {
namespace {

// Maps tensor name -> the shard that holds it, for single-file and sharded checkpoints.
std::map<std::string, std::shared_ptr<SafetensorsFile>> open_shards(const std::string& dir) {
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_tensor;
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (std::filesystem::exists(single)) {
    auto file = SafetensorsFile::open(single);
    for (const auto& entry : file->entries()) by_tensor[entry.first] = file;
    return by_tensor;
  }
  if (!std::filesystem::exists(index_path))
    throw InputError(dir + ": no model.safetensors or model.safetensors.index.json");
  json index = read_json_file(index_path);
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw InputError(index_path + ": field \"weight_map\" missing or not an object");
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto& item : index["weight_map"].items()) {
    if (!item.value().is_string())
      throw InputError(index_path + ": weight_map." + item.key() + " is not a file name");
    std::string shard = item.value().get<std::string>();
    if (shard.find('/') != std::string::npos)
      throw InputError(index_path + ": weight_map." + item.key() + " names a path outside " + dir);
    if (!shards.count(shard)) shards[shard] = SafetensorsFile::open(dir + "/" + shard);
    if (!shards[shard]->contains(item.key()))
      throw InputError(dir + "/" + shard + ": tensor " + item.key() + " listed in the index is absent");
    by_tensor[item.key()] = shards[shard];
  }
  return by_tensor;
}

class WeightReader {
 public:
  WeightReader(std::map<std::string, std::shared_ptr<SafetensorsFile>> files, at::ScalarType dtype)
      : files_(std::move(files)), dtype_(dtype) {}
  bool has(const std::string& name) const { return files_.count(name) != 0; }
  // Loads `name` and checks its shape.
  at::Tensor get(const std::string& name, std::vector<int64_t> shape) const {
    auto it = files_.find(name);
    if (it == files_.end()) throw InputError("checkpoint: missing tensor " + name);
    at::Tensor t = it->second->load(name, dtype_);
    if (t.sizes().vec() != shape)
      throw InputError(it->second->path() + ": tensor " + name + " has shape " +
                       shape_text(t.sizes().vec()) + ", expected " + shape_text(shape));
    return t;
  }

 private:
  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  std::map<std::string, std::shared_ptr<SafetensorsFile>> files_;
  at::ScalarType dtype_;
};

LayerWeights read_layer(const WeightReader& w, const ModelConfig& c, int i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  const int64_t q_dim = int64_t(c.num_attention_heads) * c.head_dim;
  const int64_t kv_dim = int64_t(c.num_key_value_heads) * c.head_dim;
  LayerWeights l;
  l.attn_norm = w.get(p + "input_layernorm.weight", {D});
  l.mlp_norm = w.get(p + "post_attention_layernorm.weight", {D});
  l.wq = w.get(p + "self_attn.q_proj.weight", {q_dim, D});
  l.wk = w.get(p + "self_attn.k_proj.weight", {kv_dim, D});
  l.wv = w.get(p + "self_attn.v_proj.weight", {kv_dim, D});
  l.wo = w.get(p + "self_attn.o_proj.weight", {D, q_dim});
  if (c.attention_bias) {
    l.bq = w.get(p + "self_attn.q_proj.bias", {q_dim});
    l.bk = w.get(p + "self_attn.k_proj.bias", {kv_dim});
    l.bv = w.get(p + "self_attn.v_proj.bias", {kv_dim});
  }
  l.w_gate = w.get(p + "mlp.gate_proj.weight", {F, D});
  l.w_up = w.get(p + "mlp.up_proj.weight", {F, D});
  l.w_down = w.get(p + "mlp.down_proj.weight", {D, F});
  return l;
}

// A tokenizer.json whose vocabulary is the 256 bytes (SentencePiece-style byte fallback):
// every text encodes, one token per UTF-8 byte, with no file on disk.
json byte_tokenizer_json() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  auto special = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"special", true}, {"single_word", false},
                {"lstrip", false}, {"rstrip", false}, {"normalized", false}};
  };
  return json{
      {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\u2581"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"byte_fallback", true},
        {"unk_token", "<unk>"}, {"fuse_unk", true}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
}

}  // namespace

ModelConfig random_tiny_config() {
  ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = 64;
  c.intermediate_size = 172;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 259;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

at::Tensor rope_inverse_frequencies(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  at::Tensor exponents = at::arange(half, at::kDouble) * 2.0 / double(c.head_dim);
  at::Tensor inv_freq = at::pow(c.rope_theta, exponents).reciprocal();
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") return (inv_freq / s.factor).to(at::kFloat);
  if (s.type != "llama3") return inv_freq.to(at::kFloat);
  // Llama 3.1: long wavelengths slowed down by `factor`, short ones kept, a smooth ramp between.
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  double* f = inv_freq.data_ptr<double>();
  for (int64_t i = 0; i < half; ++i) {
    const double wavelen = 2.0 * M_PI / f[i];
    if (wavelen > low_wavelen) {
      f[i] /= s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      f[i] = (1 - smooth) * f[i] / s.factor + smooth * f[i];
    }
  }
  return inv_freq.to(at::kFloat);
}

std::shared_ptr<LlamaModel> LlamaModel::load(const std::string& dir, at::ScalarType dtype) {
  if (!std::filesystem::is_directory(dir)) throw InputError(dir + ": model folder not found");
  auto model = std::make_shared<LlamaModel>();
  model->config = ModelConfig::load(dir + "/config.json");
  model->tokenizer = Tokenizer::load(dir);
  model->source = dir;
  model->description = std::filesystem::path(dir).filename().string() + " (" + dir + ")";
  const ModelConfig& c = model->config;
  WeightReader w(open_shards(dir), dtype);
  model->embed = w.get("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
  model->final_norm = w.get("model.norm.weight", {c.hidden_size});
  const bool has_head = w.has("lm_head.weight");
  if (!has_head && !c.tie_word_embeddings)
    throw InputError(dir + ": lm_head.weight is missing and tie_word_embeddings is false");
  model->lm_head = has_head ? w.get("lm_head.weight", {c.vocab_size, c.hidden_size}) : model->embed;
  for (int i = 0; i < c.num_hidden_layers; ++i) model->layers.push_back(read_layer(w, c, i));
  model->inv_freq = rope_inverse_frequencies(c);
  return model;
}

std::shared_ptr<LlamaModel> LlamaModel::random(const ModelConfig& c, uint64_t seed) {
  auto model = std::make_shared<LlamaModel>();
  model->config = c;
  model->tokenizer = Tokenizer::from_json(byte_tokenizer_json(), json{{"add_bos_token", true},
                                          {"bos_token", "<s>"}, {"eos_token", "</s>"}},
                                          "<built-in byte tokenizer>");
  model->trained = false;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto normal = [&](std::vector<int64_t> shape) { return at::normal(0.0, 0.02, shape, gen); };
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  const int64_t q_dim = int64_t(c.num_attention_heads) * c.head_dim;
  const int64_t kv_dim = int64_t(c.num_key_value_heads) * c.head_dim;
  model->embed = normal({c.vocab_size, D});
  model->final_norm = at::ones({D});
  model->lm_head = c.tie_word_embeddings ? model->embed : normal({c.vocab_size, D});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights l;
    l.attn_norm = at::ones({D});
    l.mlp_norm = at::ones({D});
    l.wq = normal({q_dim, D});
    l.wk = normal({kv_dim, D});
    l.wv = normal({kv_dim, D});
    l.wo = normal({D, q_dim});
    if (c.attention_bias) {
      l.bq = normal({q_dim});
      l.bk = normal({kv_dim});
      l.bv = normal({kv_dim});
    }
    l.w_gate = normal({F, D});
    l.w_up = normal({F, D});
    l.w_down = normal({D, F});
    model->layers.push_back(l);
  }
  model->inv_freq = rope_inverse_frequencies(c);
  return model;
}

bool LlamaModel::is_builtin_reference(const std::string& reference) {
  return reference == "random-tiny";
}

std::shared_ptr<LlamaModel> LlamaModel::from_reference(const std::string& reference) {
  if (reference == "random-tiny") {
    auto model = random(random_tiny_config(), 0);
    model->source = reference;
    model->description =
        "random-tiny: random weights generated from seed 0 (UNTRAINED placeholder until the "
        "embedded trained model exists; task scores are not meaningful)";
    return model;
  }
  return load(reference);
}

}  // namespace kvb
