#include "engine/model/llama_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/common/files.h"
#include "engine/common/json_fields.h"
#include "engine/common/nearest_name.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/sentencepiece_json.h"

namespace kvb {
namespace {

// The tensors of a checkpoint by name, and the file that lists them (named in messages).
struct Checkpoint {
  std::string listing;  // model.safetensors or model.safetensors.index.json
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_tensor;
};

// Opens a single-file or sharded checkpoint.
Checkpoint open_checkpoint(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (std::filesystem::exists(single)) {
    Checkpoint checkpoint{single, {}};
    auto file = SafetensorsFile::open(single);
    for (const auto& entry : file->entries()) checkpoint.by_tensor[entry.first] = file;
    return checkpoint;
  }
  if (!std::filesystem::exists(index_path))
    throw InputError(dir + ": no model.safetensors or model.safetensors.index.json");
  json index = read_json_file(index_path);
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw InputError(index_path + ": field \"weight_map\" missing or not an object");
  Checkpoint checkpoint{index_path, {}};
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto& item : index["weight_map"].items()) {
    const std::string where = index_path + ": weight_map." + item.key();
    if (!item.value().is_string()) throw InputError(where + " is not a file name");
    std::string shard = item.value().get<std::string>();
    if (shard.find('/') != std::string::npos)
      throw InputError(where + " names a path outside " + dir);
    if (!std::filesystem::exists(dir + "/" + shard))
      throw InputError(where + " names shard " + shard + ", which does not exist");
    if (!shards.count(shard)) shards[shard] = SafetensorsFile::open(dir + "/" + shard);
    if (!shards[shard]->contains(item.key()))
      throw InputError(dir + "/" + shard + ": tensor " + item.key() + " listed in the index is absent");
    checkpoint.by_tensor[item.key()] = shards[shard];
  }
  // transformers loads every tensor of each shard, listed or not: one the index leaves out
  // would be ignored here, so it is refused (as an unused tensor of a single file is).
  for (const auto& [shard, file] : shards)
    for (const auto& entry : file->entries())
      if (auto it = checkpoint.by_tensor.find(entry.first);
          it == checkpoint.by_tensor.end() || it->second != file)
        throw InputError(file->path() + ": tensor " + entry.first + " is not listed for this "
                         "shard in model.safetensors.index.json; refusing to ignore it");
  return checkpoint;
}

}  // namespace

void check_checkpoint_files(const std::string& dir) { open_checkpoint(dir); }

namespace {

class WeightReader {
 public:
  WeightReader(Checkpoint checkpoint, const LoadOptions& options)
      : checkpoint_(std::move(checkpoint)), dtype_(options.dtype), device_(options.device) {}
  bool has(const std::string& name) const { return checkpoint_.by_tensor.count(name) != 0; }
  // Loads `name` and checks its shape.
  at::Tensor get(const std::string& name, std::vector<int64_t> shape) {
    auto it = checkpoint_.by_tensor.find(name);
    if (it == checkpoint_.by_tensor.end())
      throw InputError(checkpoint_.listing + ": missing tensor " + name);
    // In the file's dtype, converted on the host when it differs, then copied to the device.
    at::Tensor t = it->second->load(name, dtype_).to(device_);
    if (t.sizes().vec() != shape)
      throw InputError(it->second->path() + ": tensor " + name + " has shape " +
                       shape_text(t.sizes().vec()) + ", expected " + shape_text(shape));
    used_.insert(name);
    return t;
  }
  // A tensor the model does not use would be ignored silently (a bias the architecture lacks,
  // a layer beyond num_hidden_layers): refused instead. RoPE buffers are derived, not weights.
  void require_all_used(const std::string& model_type) const {
    for (const auto& [name, file] : checkpoint_.by_tensor) {
      if (used_.count(name) || ends_with(name, ".rotary_emb.inv_freq")) continue;
      throw InputError(file->path() + ": tensor " + name + " is not part of a " + model_type +
                       " model as config.json describes it; refusing to ignore it");
    }
  }

 private:
  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  Checkpoint checkpoint_;
  at::ScalarType dtype_;
  at::Device device_;
  std::set<std::string> used_;
};

void read_attention(WeightReader& w, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t D = c.hidden_size, d = c.head_dim;
  const int64_t q_dim = int64_t(c.num_attention_heads) * d;
  const int64_t kv_dim = int64_t(c.num_key_value_heads) * d;
  l.q_rows = q_dim;
  l.w_qkv = at::cat({w.get(p + "self_attn.q_proj.weight", {q_dim, D}),
                     w.get(p + "self_attn.k_proj.weight", {kv_dim, D}),
                     w.get(p + "self_attn.v_proj.weight", {kv_dim, D})});
  l.wo = w.get(p + "self_attn.o_proj.weight", {D, q_dim});
  if (c.attention_bias)
    l.b_qkv = at::cat({w.get(p + "self_attn.q_proj.bias", {q_dim}),
                       w.get(p + "self_attn.k_proj.bias", {kv_dim}),
                       w.get(p + "self_attn.v_proj.bias", {kv_dim})});
  if (c.output_bias) l.bo = w.get(p + "self_attn.o_proj.bias", {D});
  if (c.has_qk_norm()) {
    l.q_norm = w.get(p + "self_attn.q_norm.weight", {d});
    l.k_norm = w.get(p + "self_attn.k_norm.weight", {d});
  }
}

LayerWeights read_layer(WeightReader& w, const ModelConfig& c, int i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  LayerWeights l;
  l.attn_norm = w.get(p + "input_layernorm.weight", {D});
  l.mlp_norm = w.get(p + "post_attention_layernorm.weight", {D});
  read_attention(w, c, p, l);
  l.w_gate_up = c.has_fused_gate_up()  // GLM stores them stacked, the gate's rows first
                    ? w.get(p + "mlp.gate_up_proj.weight", {2 * F, D})
                    : at::cat({w.get(p + "mlp.gate_proj.weight", {F, D}),
                               w.get(p + "mlp.up_proj.weight", {F, D})});
  l.w_down = w.get(p + "mlp.down_proj.weight", {D, F});
  return l;
}

// A tokenizer.json whose vocabulary is the 256 bytes plus "▁" (SentencePiece-style byte
// fallback): every text encodes, one token per UTF-8 byte, with no file on disk.
json byte_tokenizer_json() {
  json vocab = byte_fallback_vocab();
  // The word-boundary marker gets its own token so that decoding turns it back into a space
  // (as byte tokens, it would only be reassembled after the decoder's Replace step).
  vocab["\u2581"] = 259;
  return sentencepiece_tokenizer_json(std::move(vocab), json::array());
}

}  // namespace

namespace {

// The round and primes of Yann Collet's xxHash64, in four lanes over 32-byte stripes: four
// independent multiply chains, at about the speed memory gives the bytes. (Byte-wise FNV-1a
// until 2026-11-30: one dependent multiply a byte, about 20 s for an 8B model's 16 GB, paid by
// the first InfiniGen cell of a run.) Words are read in the host's order: little-endian on
// every platform kvbench builds for.
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL, kPrime2 = 0xC2B2AE3D27D4EB4FULL;

uint64_t rotate_left(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t hash_round(uint64_t lane, uint64_t word) {
  return rotate_left(lane + word * kPrime2, 31) * kPrime1;
}
// MurmurHash3's finalizer: every input bit reaches every output bit.
uint64_t avalanche(uint64_t h) {
  h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
  h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// `hash` extended by n bytes at p.
uint64_t hash_bytes(uint64_t hash, const uint8_t* p, size_t n) {
  uint64_t lanes[4] = {hash + kPrime1 + kPrime2, hash + kPrime2, hash, hash - kPrime1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      uint64_t word;
      std::memcpy(&word, p + i + 8 * size_t(j), 8);
      lanes[j] = hash_round(lanes[j], word);
    }
  uint64_t h = rotate_left(lanes[0], 1) + rotate_left(lanes[1], 7) + rotate_left(lanes[2], 12) +
               rotate_left(lanes[3], 18);
  for (; i < n; ++i) h = (h ^ p[i]) * kPrime1;  // the last n % 32 bytes
  return avalanche(h ^ uint64_t(n));
}

}  // namespace

uint64_t weights_hash(const LlamaModel& model) {
  uint64_t hash = 0;
  auto mix = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    const at::Tensor c = t.contiguous().cpu();
    hash = hash_bytes(hash, static_cast<const uint8_t*>(c.data_ptr()), c.nbytes());
  };
  mix(model.embed);
  mix(model.final_norm);
  mix(model.lm_head);
  for (const LayerWeights& l : model.layers)
    for (const at::Tensor* t : l.all()) mix(*t);
  return hash;
}

ModelConfig llama_config(const LlamaShape& shape) {
  ModelConfig c;
  c.model_type = "llama";
  c.num_hidden_layers = shape.layers;
  c.hidden_size = shape.hidden;
  c.intermediate_size = shape.ffn;
  c.num_attention_heads = shape.heads;
  c.num_key_value_heads = shape.kv_heads;
  c.head_dim = shape.head_dim;
  c.vocab_size = shape.vocab;
  c.max_position_embeddings = shape.max_positions;
  c.rope_theta = shape.rope_theta;
  c.tie_word_embeddings = shape.tied;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

ModelConfig random_tiny_config() {
  return llama_config({.layers = 4, .hidden = 64, .ffn = 172, .heads = 4, .kv_heads = 2,
                       .head_dim = 16, .vocab = 260, .max_positions = 8192});
}

at::Tensor rope_inverse_frequencies(const ModelConfig& c) {
  const int64_t half = c.rotary_dim() / 2;
  at::Tensor exponents = at::arange(half, at::kDouble) * 2.0 / double(c.rotary_dim());
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

namespace {

// The LM head: lm_head.weight, or the embedding when tied. A tied model whose file also holds
// a different lm_head.weight is ambiguous (transformers would use the embedding): refused.
at::Tensor read_lm_head(WeightReader& w, const ModelConfig& c, const at::Tensor& embed,
                        const std::string& dir) {
  const bool has_head = w.has("lm_head.weight");
  if (!has_head && !c.tie_word_embeddings)
    throw InputError(dir + ": lm_head.weight is missing and tie_word_embeddings is false");
  if (!has_head) return embed;
  at::Tensor head = w.get("lm_head.weight", {c.vocab_size, c.hidden_size});
  if (c.tie_word_embeddings && !at::equal(head, embed))
    throw InputError(dir + "/config.json: field 'tie_word_embeddings': true, but lm_head.weight "
                     "differs from model.embed_tokens.weight");
  return c.tie_word_embeddings ? embed : head;
}

// transformers (since late 2024) saves a tokenizer's chat template to chat_template.jinja and,
// where that file is present, reads it instead of tokenizer_config.json's chat_template.
void read_chat_template_file(const std::string& dir, LlamaModel& model) {
  const std::string file = dir + "/chat_template.jinja";
  model.chat_template_file = dir + "/tokenizer_config.json: chat_template";
  if (!std::filesystem::is_regular_file(file)) return;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw InputError(file + ": empty (a chat template file with no template)");
  model.tokenizer_config["chat_template"] = text.str();
  model.chat_template_file = file;
}

// The chat template's shape checked at load, its error naming the model's folder (the check
// itself names the key alone: it also reads configs that come from no file).
void check_chat_template(const std::string& dir, const LlamaModel& model) {
  try {
    detect_chat_template(model.tokenizer_config);
  } catch (const InputError& e) {
    throw InputError(dir + "/" + e.what());
  }
}

}  // namespace

std::shared_ptr<LlamaModel> LlamaModel::load(const std::string& dir, const LoadOptions& options) {
  if (!std::filesystem::is_directory(dir)) throw InputError(dir + ": model folder not found");
  auto model = std::make_shared<LlamaModel>();
  model->config = ModelConfig::load(dir + "/config.json", options.allow_unknown_config_keys);
  model->tokenizer_json = read_json_file(dir + "/tokenizer.json");
  // With a legacy special_tokens_map.json (read_tokenizer_config).
  model->tokenizer_config =
      read_tokenizer_config(dir, nullptr, options.allow_unknown_config_keys);
  read_chat_template_file(dir, *model);
  check_chat_template(dir, *model);
  // Tokenizer::load also reads generation_config.json's extra EOS ids.
  model->tokenizer = Tokenizer::load(dir, options.allow_unknown_config_keys);
  if (model->tokenizer->vocab_size() > model->config.vocab_size)  // a token with no embedding row
    throw InputError(dir + "/tokenizer.json: token ids up to " +
                     std::to_string(model->tokenizer->vocab_size() - 1) +
                     ", beyond config.json's vocab_size " +
                     std::to_string(model->config.vocab_size));
  model->source = dir;
  model->description = std::filesystem::path(dir).filename().string() + " (" + dir + ")";
  if (!options.weights) return model;
  const ModelConfig& c = model->config;
  WeightReader w(open_checkpoint(dir), options);
  model->embed = w.get("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
  model->final_norm = w.get("model.norm.weight", {c.hidden_size});
  model->lm_head = read_lm_head(w, c, model->embed, dir);
  for (int i = 0; i < c.num_hidden_layers; ++i) model->layers.push_back(read_layer(w, c, i));
  w.require_all_used(c.model_type);
  model->inv_freq = rope_inverse_frequencies(c).to(options.device);
  return model;
}

std::vector<std::string> LlamaModel::unknown_key_warnings() const {
  std::vector<std::string> out;
  for (const std::string& key : config.unknown_keys)
    out.push_back(unknown_key_warning(source + "/config.json", key));
  // The tokenizer's keys are tokenizer_config.json's, but for those naming their own file
  // ("generation_config.json: repetition_penalty").
  for (const std::string& key : tokenizer->unknown_config_keys()) {
    const size_t named = key.find(".json: ");
    out.push_back(named == std::string::npos
                      ? unknown_key_warning(source + "/tokenizer_config.json", key)
                      : unknown_key_warning(source + "/" + key.substr(0, named + 5),
                                            key.substr(named + 7)));
  }
  return out;
}

namespace {

// A generator of `device`'s kind seeded with `seed`, independent of the global one.
at::Generator seeded_generator(at::Device device, uint64_t seed) {
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Generator gen = at::globalContext().defaultGenerator(device).clone();
  gen.set_current_seed(seed);
  return gen;
}

}  // namespace

std::shared_ptr<LlamaModel> LlamaModel::random(const ModelConfig& c, uint64_t seed,
                                               const LoadOptions& options) {
  auto model = std::make_shared<LlamaModel>();
  model->config = c;
  model->tokenizer_json = byte_tokenizer_json();
  model->tokenizer_config = {{"add_bos_token", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
  model->tokenizer = Tokenizer::from_json(model->tokenizer_json, model->tokenizer_config,
                                          "<built-in byte tokenizer>");
  model->trained = false;
  if (!options.weights) return model;
  at::Generator gen = seeded_generator(options.device, seed);
  const at::TensorOptions on_device = at::TensorOptions().device(options.device);
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, 0.02, shape, gen, on_device.dtype(at::kFloat)).to(options.dtype);
  };
  auto ones = [&](int64_t n) { return at::ones({n}, on_device.dtype(options.dtype)); };
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  const int64_t q_dim = int64_t(c.num_attention_heads) * c.head_dim;
  const int64_t kv_dim = int64_t(c.num_key_value_heads) * c.head_dim;
  model->embed = normal({c.vocab_size, D});
  model->final_norm = ones(D);
  model->lm_head = c.tie_word_embeddings ? model->embed : normal({c.vocab_size, D});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights l;
    l.attn_norm = ones(D);
    l.mlp_norm = ones(D);
    l.q_rows = q_dim;
    // Drawn one matrix at a time, in the order the separate projections always were, so a
    // seed gives the same weights as before they were stacked.
    at::Tensor wq = normal({q_dim, D}), wk = normal({kv_dim, D}), wv = normal({kv_dim, D});
    l.w_qkv = at::cat({wq, wk, wv});
    l.wo = normal({D, q_dim});
    if (c.attention_bias) {
      at::Tensor bq = normal({q_dim}), bk = normal({kv_dim}), bv = normal({kv_dim});
      l.b_qkv = at::cat({bq, bk, bv});
    }
    if (c.output_bias) l.bo = normal({D});
    if (c.has_qk_norm()) {  // not all ones, so a test notices when the norm is skipped
      l.q_norm = (1.0 + normal({c.head_dim}).to(at::kFloat) * 10.0).to(options.dtype);
      l.k_norm = (1.0 + normal({c.head_dim}).to(at::kFloat) * 10.0).to(options.dtype);
    }
    at::Tensor w_gate = normal({F, D}), w_up = normal({F, D});
    l.w_gate_up = at::cat({w_gate, w_up});
    l.w_down = normal({D, F});
    model->layers.push_back(l);
  }
  model->inv_freq = rope_inverse_frequencies(c).to(options.device);
  return model;
}

std::shared_ptr<LlamaModel> LlamaModel::to(at::Device device, at::ScalarType dtype) const {
  auto copy = std::make_shared<LlamaModel>();
  copy->config = config;
  copy->tokenizer = tokenizer;
  copy->tokenizer_json = tokenizer_json;
  copy->tokenizer_config = tokenizer_config;
  copy->chat_template_file = chat_template_file;
  copy->source = source;
  copy->description = description;
  copy->trained = trained;
  auto moved = [&](const at::Tensor& t) { return t.defined() ? t.to(device, dtype) : t; };
  copy->embed = moved(embed);
  copy->final_norm = moved(final_norm);
  copy->lm_head = lm_head.is_same(embed) ? copy->embed : moved(lm_head);
  for (const LayerWeights& l : layers) {
    LayerWeights m = l;
    for (at::Tensor* t : m.all()) *t = moved(*t);
    copy->layers.push_back(m);
  }
  copy->inv_freq = inv_freq.to(device);
  return copy;
}

namespace {

using TensorMap = std::map<std::string, at::Tensor>;

// config.json's "torch_dtype" for the dtypes safetensors files are written in.
const char* torch_dtype_name(at::ScalarType dtype, const std::string& dir) {
  if (dtype == at::kFloat) return "float32";
  if (dtype == at::kHalf) return "float16";
  if (dtype == at::kBFloat16) return "bfloat16";
  throw InputError(dir + ": cannot save weights as " + std::string(c10::toString(dtype)) +
                   " (F32, F16, BF16 only)");
}

// The weights under their Hugging Face names, converted to `dtype`.
TensorMap hf_tensors(const LlamaModel& m, at::ScalarType dtype) {
  TensorMap out;
  auto put = [&](const std::string& name, const at::Tensor& t) { out[name] = t.to(dtype).contiguous(); };
  put("model.embed_tokens.weight", m.embed);  // [V, D]
  put("model.norm.weight", m.final_norm);     // [D]
  if (!m.config.tie_word_embeddings) put("lm_head.weight", m.lm_head);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWeights& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    put(p + "input_layernorm.weight", l.attn_norm);
    put(p + "post_attention_layernorm.weight", l.mlp_norm);
    put(p + "self_attn.q_proj.weight", l.wq());
    put(p + "self_attn.k_proj.weight", l.wk());
    put(p + "self_attn.v_proj.weight", l.wv());
    put(p + "self_attn.o_proj.weight", l.wo);
    if (l.b_qkv.defined()) {
      put(p + "self_attn.q_proj.bias", l.bq());
      put(p + "self_attn.k_proj.bias", l.bk());
      put(p + "self_attn.v_proj.bias", l.bv());
    }
    if (l.bo.defined()) put(p + "self_attn.o_proj.bias", l.bo);
    if (l.q_norm.defined()) {
      put(p + "self_attn.q_norm.weight", l.q_norm);
      put(p + "self_attn.k_norm.weight", l.k_norm);
    }
    if (m.config.has_fused_gate_up()) {
      put(p + "mlp.gate_up_proj.weight", l.w_gate_up);
    } else {
      put(p + "mlp.gate_proj.weight", l.w_gate());
      put(p + "mlp.up_proj.weight", l.w_up());
    }
    put(p + "mlp.down_proj.weight", l.w_down);
  }
  return out;
}

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.flush()) throw InputError(path + ": write failed");
}

std::string shard_name(int i, int n) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", i + 1, n);
  return name;
}

// Tensors in name order, cut into `shards` consecutive groups of near-equal count.
std::vector<TensorMap> split_into_shards(const TensorMap& tensors, int shards) {
  std::vector<TensorMap> groups(shards);
  size_t i = 0;
  for (const auto& [name, t] : tensors) groups[i++ * shards / tensors.size()][name] = t;
  return groups;
}

// model.safetensors, or the shards and model.safetensors.index.json, into `dir`.
void write_weights(const std::string& dir, const TensorMap& tensors, int shards) {
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards == 1) return write_safetensors(dir + "/model.safetensors", tensors, metadata);
  json weight_map = json::object();
  int64_t total_size = 0;
  const std::vector<TensorMap> groups = split_into_shards(tensors, shards);
  for (int i = 0; i < shards; ++i) {
    const std::string file = shard_name(i, shards);
    write_safetensors(dir + "/" + file, groups[i], metadata);
    for (const auto& [name, t] : groups[i]) {
      weight_map[name] = file;
      total_size += t.numel() * t.element_size();
    }
  }
  write_json(dir + "/model.safetensors.index.json",
             {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}});
}

// generation_config.json as transformers writes it: the ids generation starts and stops with.
// eos_token_id lists every id this model's generation stops at (config.json's and the
// tokenizer's), so that a saved and reloaded model stops where the original did.
json generation_config(const LlamaModel& model) {
  std::vector<int> eos = model.config.eos_token_ids;
  if (model.tokenizer)
    for (int id : model.tokenizer->eos_ids())
      if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  json j = {{"_from_model_config", true}};
  if (model.config.bos_token_id >= 0) j["bos_token_id"] = model.config.bos_token_id;
  if (eos.size() == 1) j["eos_token_id"] = eos[0];
  else if (!eos.empty()) j["eos_token_id"] = eos;
  return j;
}

void write_folder(const LlamaModel& model, const std::string& dir, const TensorMap& tensors,
                  int shards, at::ScalarType dtype) {
  json config = model.config.to_json();
  config["torch_dtype"] = torch_dtype_name(dtype, dir);
  write_json(dir + "/config.json", config);
  write_weights(dir, tensors, shards);
  write_json(dir + "/tokenizer.json", model.tokenizer_json);
  write_json(dir + "/tokenizer_config.json", model.tokenizer_config);
  write_json(dir + "/generation_config.json", generation_config(model));
}

// A fresh temp folder beside `dir` (creating `dir`'s parents).
std::string make_temp_folder(const std::string& dir) {
  std::filesystem::path parent = std::filesystem::absolute(dir).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  std::string tmpl = std::filesystem::absolute(dir).string() + ".tmp-XXXXXX";
  if (ec || !mkdtemp(tmpl.data()))
    throw InputError(dir + ": cannot create a temp folder in " + parent.string());
  return tmpl;
}

}  // namespace

void save_model(const LlamaModel& model, const std::string& dir, int shards,
                at::ScalarType dtype, const std::map<std::string, json>& extra_json) {
  torch_dtype_name(dtype, dir);  // rejects other dtypes before anything is written
  const TensorMap tensors = hf_tensors(model, dtype);
  if (shards < 1 || size_t(shards) > tensors.size())
    throw InputError(dir + ": shards must be in [1, " + std::to_string(tensors.size()) +
                     "] (one tensor per shard at least), got " + std::to_string(shards));
  if (!model.tokenizer_json.is_object()) throw InputError(dir + ": the model has no tokenizer.json");
  std::error_code ec;
  if (std::filesystem::exists(dir) && !std::filesystem::is_empty(dir, ec))
    throw InputError(dir + ": exists and is not an empty folder; not overwriting it");
  const std::string tmp = make_temp_folder(dir);
  try {
    write_folder(model, tmp, tensors, shards, dtype);
    for (const auto& [name, content] : extra_json) write_json(tmp + "/" + name, content);
    std::filesystem::rename(tmp, dir, ec);  // replaces `dir` only when it is an empty folder
    if (ec) throw InputError(dir + ": cannot rename " + tmp + " into place: " + ec.message());
  } catch (...) {
    remove_tree(tmp);
    throw;
  }
}

namespace {

// Llama-3-8B's layer shape (hidden 4096, 32 heads, 8 KV heads of 128, MLP 14336, rope theta
// 5e5) with 4 layers so it fits a CPU box (~3.5 GB fp32), and the built-in byte tokenizer's
// 260-entry vocabulary (Llama-3's 128k-entry LM head is left out of "rest"): the `latency`
// suite's model. Random weights: timings only, task scores are meaningless.
ModelConfig random_llama3_8b_4layers_config() {
  return llama_config({.layers = 4, .hidden = 4096, .ffn = 14336, .heads = 32, .kv_heads = 8,
                       .head_dim = 128, .vocab = 260,  // the built-in byte tokenizer's vocabulary
                       .max_positions = 32768 + 1024, .rope_theta = 500000.0});
}

// All 32 layers of that shape (about 7 B weights: 14 GB in bf16), positions up to 128k + 1k:
// GPU runs at full scale without a download.
ModelConfig random_llama3_8b_config() {
  ModelConfig c = random_llama3_8b_4layers_config();
  c.num_hidden_layers = 32;
  c.max_position_embeddings = 131072 + 1024;
  return c;
}

struct BuiltinModel {
  const char* name;
  ModelConfig (*config)();  // generated from seed 0; nullptr: a trained model of models/
  const char* about;
};

const BuiltinModel kBuiltinModels[] = {
    {"kvbench-tiny", nullptr,
     "v1, the first retrieval model trained by `kvbench train-tiny` (4 layers, on 2 CPU cores)"},
    {"kvbench-tiny-v2", nullptr,
     "the default model: the retrieval model v2 (6 layers, trained for 4k tokens on a GPU by "
     "`kvbench train-tiny`)"},
    {"random-tiny", random_tiny_config,
     "random weights from seed 0, byte vocabulary (UNTRAINED: for tests; task scores are not "
     "meaningful)"},
    {"random-llama3-8b-4layers", random_llama3_8b_4layers_config,
     "Llama-3-8B layer shape (hidden 4096, 32/8 heads of 128, MLP 14336), 4 layers, byte "
     "vocabulary (260), random weights from seed 0 (timings only)"},
    {"random-llama3-8b", random_llama3_8b_config,
     "Llama-3-8B shape (32 layers, hidden 4096, 32/8 heads of 128, MLP 14336, positions to 128k), "
     "byte vocabulary (260), random weights from seed 0 drawn on the run's device (timings "
     "only)"},
};

}  // namespace

std::string embedded_model_dir() {
  const char* env = std::getenv("KVBENCH_TINY_MODEL");
  return env && *env ? env : KVBENCH_SOURCE_DIR "/models/kvbench-tiny";
}

std::string trained_model_dir(const std::string& name) {
  if (name == "kvbench-tiny") return embedded_model_dir();
  return KVBENCH_SOURCE_DIR "/models/" + name;
}

bool LlamaModel::is_builtin_reference(const std::string& reference) {
  for (const BuiltinModel& b : kBuiltinModels)
    if (reference == b.name) return true;
  return false;
}

std::vector<std::string> LlamaModel::builtin_model_names() {
  std::vector<std::string> names;
  for (const BuiltinModel& b : kBuiltinModels) names.push_back(b.name);
  return names;
}

std::string LlamaModel::folder_of(const std::string& reference) {
  for (const BuiltinModel& b : kBuiltinModels)
    if (reference == b.name) return b.config ? "" : trained_model_dir(reference);
  return reference;
}

std::shared_ptr<LlamaModel> LlamaModel::from_reference(const std::string& reference,
                                                       const LoadOptions& options) {
  for (const BuiltinModel& b : kBuiltinModels) {
    if (reference != b.name) continue;
    std::shared_ptr<LlamaModel> model;
    std::string about = b.about;
    if (b.config) {
      model = random(b.config(), 0, options);
    } else {
      model = load(trained_model_dir(reference), options);
      about += " (" + trained_model_dir(reference) + ")";
    }
    model->source = reference;
    model->description = reference + ": " + about;
    return model;
  }
  if (!std::filesystem::is_directory(reference))
    throw InputError(reference + ": model folder not found, and not a built-in model (" +
                     join(builtin_model_names(), ", ") + ")" +
                     did_you_mean(reference, builtin_model_names()));
  return load(reference, options);
}

}  // namespace kvb
