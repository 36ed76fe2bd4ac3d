// Loading a Hugging Face tokenizer folder: picks the BPE flavour and the BOS/EOS ids.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engine/common/json_fields.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace kvb {
namespace {

using nlohmann::json;
using tok::fail;

// Which file a tokenizer setting came from, for its errors: tokenizer_config.json, or
// special_tokens_map.json for the special tokens that file set (read_tokenizer_config).
struct ConfigFiles {
  std::string config, special_tokens_map;
  SpecialTokensMapKeys from_map;
  std::string of(const std::string& key) const {
    auto has = [&key](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), key) != keys.end();
    };
    if (has(from_map.replaced)) return special_tokens_map;
    if (has(from_map.merged)) return config + " merged with " + special_tokens_map;
    return config;
  }
};

bool uses_byte_level(const json& pre_tokenizer) {
  if (!pre_tokenizer.is_object()) return false;
  const std::string type = pre_tokenizer.value("type", "");
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !pre_tokenizer.contains("pretokenizers")) return false;
  const json& list = pre_tokenizer["pretokenizers"];
  return list.is_array() && std::any_of(list.begin(), list.end(), uses_byte_level);
}

// A token given as "text" or {"content": "text"} (tokenizer_config.json); "" when null.
std::string token_text(const json& value, const std::string& file, const std::string& field) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) return tok::required_string(value, "content", file, field);
  fail(file, field, "expected a string or {\"content\": ...}");
}

// config[key] as token_text; "" when absent.
std::string config_token(const json& config, const std::string& key, const std::string& file) {
  auto it = config.find(key);
  return it == config.end() ? "" : token_text(*it, file, key);
}

int require_token(const tok::BpeTokenizer& tokenizer, const std::string& token,
                  const std::string& file, const std::string& field) {
  const int id = tokenizer.find_token(token);
  if (id < 0) fail(file, field, "\"" + token + "\" is not a token of tokenizer.json");
  return id;
}

// tokenizer.json's own keys, as the tokenizers library reads the file (which refuses others, and
// any version but 1.0).
void check_file_keys(const json& tokenizer_json, const std::string& file) {
  static const std::set<std::string> kKeys = {"version",     "truncation",    "padding",
                                              "added_tokens", "normalizer",   "pre_tokenizer",
                                              "model",       "post_processor", "decoder"};
  for (const auto& [key, value] : tokenizer_json.items())
    if (!kKeys.count(key)) fail(file, key, "not a key of tokenizer.json's format");
  if (tokenizer_json.contains("version") && tokenizer_json["version"] != "1.0")
    fail(file, "version", tokenizer_json["version"].dump() + ": only \"1.0\" is read");
  if (tokenizer_json.contains("added_tokens") && !tokenizer_json["added_tokens"].is_array())
    fail(file, "added_tokens", "expected an array");
}

// Added tokens as kvbench matches them: on the raw text, each id and text once, the text not a
// vocabulary token of another id. Flags that change the match (stripping spaces around it, whole
// words only, matching the normalized text where there is a normalizer) are refused.
void check_added_tokens(const json& tokenizer_json, const tok::BpeModel& model,
                        const std::string& file) {
  const json& added = tokenizer_json.value("added_tokens", json::array());
  const bool normalizer = !tokenizer_json.value("normalizer", json()).is_null();
  std::map<int64_t, size_t> ids;
  std::map<std::string, size_t> texts;
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& entry = added[i];
    if (!entry.is_object()) fail(file, field, "expected an object");
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      if (tok::optional_bool(entry, flag, false, file, field))
        fail(file, field + "." + flag, "true: kvbench matches added tokens as written only");
    if (normalizer && tok::optional_bool(entry, "normalized", false, file, field))
      fail(file, field + ".normalized", "true: kvbench matches added tokens on the raw text, not "
                                        "the normalizer's output");
    const int64_t id = entry["id"].get<int64_t>();
    const std::string text = entry["content"].get<std::string>();
    if (auto [at, fresh] = ids.emplace(id, i); !fresh)
      fail(file, field + ".id", std::to_string(id) + " is also added_tokens[" +
                                    std::to_string(at->second) + "]'s");
    if (auto [at, fresh] = texts.emplace(text, i); !fresh)
      fail(file, field + ".content", "\"" + text + "\" is also added_tokens[" +
                                         std::to_string(at->second) + "]'s");
    const int in_vocab = model.find(text);
    if (in_vocab >= 0 && in_vocab != id)
      fail(file, field + ".content", "\"" + text + "\" is token " + std::to_string(in_vocab) +
                                         " of the model's vocabulary, not " + std::to_string(id));
  }
}

// The special tokens a TemplateProcessing post-processor puts before a single sequence
// (Llama 3: <|begin_of_text|>; GLM-4: [gMASK] <sop>); empty when there is none. A template that
// adds tokens after the sequence is refused: encode() would silently leave them out.
std::vector<int> post_processor_prefix(const json& processor, const tok::BpeTokenizer& tokenizer,
                                       const std::string& file) {
  if (!processor.is_object()) return {};
  const std::string type = processor.value("type", "");
  if (type == "Sequence" && processor.contains("processors") && processor["processors"].is_array()) {
    for (const json& inner : processor["processors"]) {
      if (std::vector<int> ids = post_processor_prefix(inner, tokenizer, file); !ids.empty()) return ids;
    }
    return {};
  }
  if (type == "ByteLevel") return {};  // offsets only (Llama 3's, beside its template)
  if (type != "TemplateProcessing")
    fail(file, "post_processor.type", "\"" + type + "\": kvbench reproduces TemplateProcessing "
                                      "(in a Sequence, beside ByteLevel) only");
  const json& single = tok::required(processor, "single", file, "post_processor");
  if (!single.is_array()) return {};
  // The template's own ids for its tokens, which transformers adds, where it lists them.
  const json map = processor.value("special_tokens", json::object());
  std::vector<int> prefix;
  bool after_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string field = "post_processor.single[" + std::to_string(i) + "]";
    if (!single[i].is_object() || !single[i].contains("SpecialToken")) {
      after_sequence = true;
      continue;
    }
    if (after_sequence) fail(file, field, "special tokens after the sequence are not supported");
    const std::string name = tok::required_string(single[i]["SpecialToken"], "id", file, field + ".SpecialToken");
    const int id = require_token(tokenizer, name, file, field + ".SpecialToken.id");
    if (map.is_object() && map.contains(name) && map[name].is_object() &&
        map[name].contains("ids") && map[name]["ids"] != json::array({id}))
      fail(file, "post_processor.special_tokens." + name + ".ids",
           map[name]["ids"].dump() + " is not [" + std::to_string(id) + "], the id of \"" + name +
               "\" in the vocabulary");
    prefix.push_back(id);
  }
  return prefix;
}

struct SpecialIds {
  std::vector<int> prefix;  // what encode(text, add_special=true) puts first, where add_bos
  std::vector<int> eos;
  bool add_bos = false;
  bool add_eos = false;     // encode(text, add_special=true) appends eos[0]
};

// tokenizer_config.json decides (add_bos_token, bos_token, eos_token); without it, the
// post-processor's template tells whether and which BOS is added. A template of several
// special tokens (GLM-4's [gMASK] <sop>) is added whole.
SpecialIds special_ids(const tok::BpeTokenizer& tokenizer, const json& tokenizer_json,
                       const json& config, const std::string& json_file,
                       const ConfigFiles& files) {
  // The file each setting came from, for its errors.
  const std::string bos_file = files.of("bos_token"), eos_file = files.of("eos_token"),
                    add_bos_file = files.of("add_bos_token"),
                    add_eos_file = files.of("add_eos_token");
  SpecialIds ids;
  const std::vector<int> template_prefix =
      post_processor_prefix(tokenizer_json.value("post_processor", json()), tokenizer, json_file);
  const std::string bos = config_token(config, "bos_token", bos_file);
  const int config_bos = bos.empty() ? -1 : require_token(tokenizer, bos, bos_file, "bos_token");
  if (template_prefix.size() > 1) {
    if (config_bos >= 0 && config_bos != template_prefix[0])
      fail(bos_file, "bos_token", "\"" + bos + "\" is not the first token of tokenizer.json's "
                                  "post_processor template");
    ids.prefix = template_prefix;
  } else if (config_bos >= 0) {
    // transformers rebuilds the template with tokenizer_config.json's BOS only where the file
    // sets add_bos_token (transformers 5; in 4, LlamaTokenizerFast always, the base class
    // never): without it, which of two BOS tokens is added depends on the class.
    if (template_prefix.size() == 1 && config_bos != template_prefix[0] &&
        !config.contains("add_bos_token"))
      fail(bos_file, "bos_token",
           "\"" + bos + "\" is not the BOS of tokenizer.json's post_processor template (id " +
               std::to_string(template_prefix[0]) + "), and without add_bos_token transformers' "
               "tokenizer classes differ on which one they add: set add_bos_token");
    ids.prefix = {config_bos};
  } else {
    ids.prefix = template_prefix;
  }
  if (config.contains("add_bos_token") && config["add_bos_token"].is_null())
    fail(add_bos_file, "add_bos_token", "null, which transformers' tokenizer classes read "
                                        "differently (false, or their default): write true or false");
  ids.add_bos = tok::optional_bool(config, "add_bos_token", !template_prefix.empty(), add_bos_file, "");
  if (ids.add_bos && config.contains("add_bos_token") && config.contains("bos_token") &&
      config["bos_token"].is_null())
    fail(bos_file, "bos_token", "null while add_bos_token is true, which transformers' Llama "
                                "tokenizer refuses");
  if (ids.add_bos && ids.prefix.empty()) fail(add_bos_file, "add_bos_token", "true, but there is no bos_token");
  const std::string eos = config_token(config, "eos_token", eos_file);
  if (!eos.empty()) ids.eos.push_back(require_token(tokenizer, eos, eos_file, "eos_token"));
  ids.add_eos = tok::optional_bool(config, "add_eos_token", false, add_eos_file, "");
  if (ids.add_eos && ids.eos.empty()) fail(add_eos_file, "add_eos_token", "true, but there is no eos_token");
  return ids;
}

// tokenizer_config.json's keys that would make transformers encode or decode otherwise than
// tokenizer.json says, and that kvbench does not reproduce: refused where set to true.
void refuse_unreproduced_settings(const json& config, const ConfigFiles& files) {
  static const std::pair<const char*, const char*> kRefused[] = {
      {"split_special_tokens", "special tokens written in the text split as plain text"},
      {"from_slow", "the tokenizer rebuilt from its slow (SentencePiece) files"},
      {"add_prefix_space", "transformers rebuilds the pre-tokenizer with a prefix space"},
      {"do_lower_case", "the text lowercased before encoding"}};
  for (const auto& [key, what] : kRefused)
    if (tok::optional_bool(config, key, false, files.of(key), ""))
      fail(files.of(key), key, std::string("true (") + what + ") is not reproduced by kvbench");
  if (auto backend = config.find("backend");
      backend != config.end() && *backend != json("tokenizers"))
    fail(files.of("backend"), "backend", backend->dump() + ": kvbench reads tokenizer.json, "
                                 "transformers' \"tokenizers\" backend");
}

}  // namespace

// Any other key may change the ids (a custom class, a normalisation flag), so it is refused
// unless let through.
const std::vector<std::pair<std::string, std::string>>& tokenizer_config_key_table() {
  static const std::vector<std::pair<std::string, std::string>> table = {
    {"add_bos_token", "read"}, {"add_eos_token", "read"}, {"bos_token", "read"},
    {"eos_token", "read"}, {"clean_up_tokenization_spaces", "read"},
    {"chat_template", "read: the model's own template (chat_template auto) and its family"}, {"tokenizer_class", "read: the chat family"},
    {"split_special_tokens", "refused when true"}, {"from_slow", "refused when true"},
    {"add_prefix_space", "refused when true"}, {"do_lower_case", "refused when true"},
    {"added_tokens_decoder", "checked: tokenizer.json's added tokens"},
    {"pad_token", "checked: a token"}, {"unk_token", "checked: a token"},
    {"mask_token", "checked: a token"}, {"sep_token", "checked: a token"},
    {"cls_token", "checked: a token"}, {"additional_special_tokens", "checked: tokens"},
    {"extra_special_tokens", "checked: tokens"},
    {"model_specific_special_tokens", "checked: tokens"},
    {"backend", "checked: \"tokenizers\" (tokenizer.json), the only backend kvbench reads"},
    {"model_max_length", "truncation only"}, {"padding_side", "batching only"},
    {"truncation_side", "truncation only"}, {"model_input_names", "the model's inputs"},
    {"name_or_path", "provenance"}, {"tokenizer_file", "a path"}, {"vocab_file", "a path"},
    {"merges_file", "a path"}, {"special_tokens_map_file", "a path"}, {"is_local", "provenance"},
    {"use_fast", "an argument of AutoTokenizer, not read from the file"},
    {"processor_class", "the processor, not the tokenizer"},
    {"legacy", "the slow (SentencePiece) tokenizer only"},
    {"sp_model_kwargs", "the slow tokenizer only"},
    {"spaces_between_special_tokens", "the slow tokenizer only"},
    {"remove_space", "the slow (ChatGLM) tokenizer only"},
    {"errors", "the slow byte-level decoder only"},
    {"use_default_system_prompt", "the chat template's system prompt"}};
  return table;
}

namespace {

// The special tokens a config names must be tokens of tokenizer.json, and its
// added_tokens_decoder must give them the ids tokenizer.json does: transformers adds any other
// as a new token, and the text's ids change.
void check_named_tokens(const json& config, const tok::BpeTokenizer& tokenizer,
                        const ConfigFiles& files) {
  for (const char* key : {"pad_token", "unk_token", "mask_token", "sep_token", "cls_token"})
    if (const std::string token = config_token(config, key, files.of(key)); !token.empty())
      require_token(tokenizer, token, files.of(key), key);
  for (const char* key : {"additional_special_tokens", "extra_special_tokens",
                          "model_specific_special_tokens"}) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    const std::string file = files.of(key);
    if (!it->is_array() && !it->is_object()) fail(file, key, "expected a list or an object of tokens");
    for (const auto& [name, value] : it->items()) {
      const std::string field = std::string(key) + (it->is_array() ? "[" + name + "]" : "." + name);
      if (const std::string token = token_text(value, file, field); !token.empty())
        require_token(tokenizer, token, file, field);
    }
  }
  auto decoder = config.find("added_tokens_decoder");
  if (decoder == config.end() || decoder->is_null()) return;
  const std::string& file = files.config;
  if (!decoder->is_object()) fail(file, "added_tokens_decoder", "expected an object");
  for (const auto& [id, entry] : decoder->items()) {
    const std::string field = "added_tokens_decoder." + id;
    if (!entry.is_object()) fail(file, field, "expected an object");
    const std::string content = tok::required_string(entry, "content", file, field);
    if (std::to_string(require_token(tokenizer, content, file, field + ".content")) != id)
      fail(file, field, "\"" + content + "\" has another id in tokenizer.json");
  }
}

// The keys of `config` neither read nor known: an InputError naming the first, or, where
// `allow_unknown`, the list.
bool is_known_config_key(const std::string& key) {
  const auto& table = tokenizer_config_key_table();
  return std::any_of(table.begin(), table.end(), [&](const auto& k) { return k.first == key; });
}

std::vector<std::string> unknown_keys_of(const json& config, const std::string& file,
                                         bool allow_unknown) {
  return unknown_config_keys(config, file, is_known_config_key, "how text is encoded",
                             allow_unknown);
}

// generation_config.json's settings that would change a greedy decoding in transformers'
// generate() (which reads them unless a script overrides them), at their no-op values: kvbench
// decodes greedily and applies none of them, so a file setting one otherwise is refused, or
// with allow_ignored listed in *ignored as "generation_config.json: KEY" (LlamaModel's
// unknown_key_warnings names that file; Qwen2-Instruct's repetition_penalty 1.05, say).
// Sampling (do_sample, temperature, top_p, top_k) and lengths (max_length, max_new_tokens) are
// set by the references' scripts, as by kvbench's datasets, and left alone.
void refuse_decoding_changes(const json& config, const std::string& file, bool allow_ignored,
                             std::vector<std::string>* ignored) {
  static const std::vector<std::pair<const char*, json>> kNoOp = {
      {"repetition_penalty", 1.0},     {"encoder_repetition_penalty", 1.0},
      {"no_repeat_ngram_size", 0},     {"min_length", 0},
      {"min_new_tokens", 0},           {"num_beams", 1},
      {"suppress_tokens", json::array()}, {"begin_suppress_tokens", json::array()},
      {"bad_words_ids", nullptr},      {"forced_bos_token_id", nullptr},
      {"forced_eos_token_id", nullptr}, {"sequence_bias", nullptr},
      {"exponential_decay_length_penalty", nullptr}, {"forced_decoder_ids", nullptr}};
  for (const auto& [key, no_op] : kNoOp) {
    if (!config.contains(key)) continue;
    const json& value = config[key];
    if (value.is_null() || value == no_op) continue;  // json compares 1 and 1.0 as numbers
    if (!allow_ignored)
      fail(file, key, value.dump() + " would change transformers' greedy decoding, which "
                      "kvbench does not reproduce (pass --allow-unknown-config-keys to run "
                      "without it; the run records it)");
    ignored->push_back(std::string("generation_config.json: ") + key);
  }
}

// generation_config.json's eos_token_id (an id or a list: Llama 3 stops at several tokens),
// after its decoding settings are checked.
void add_generation_eos(const std::string& file, int vocab_size, bool allow_ignored,
                        std::vector<int>* eos, std::vector<std::string>* ignored) {
  const json config = read_json_file(file);
  if (!config.is_object()) fail(file, "", "expected a JSON object");
  refuse_decoding_changes(config, file, allow_ignored, ignored);
  if (!config.contains("eos_token_id") || config["eos_token_id"].is_null()) return;
  const json& value = config["eos_token_id"];
  const json list = value.is_array() ? value : json::array({value});
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      fail(file, "eos_token_id", "expected ids in [0, " + std::to_string(vocab_size) + ")");
    }
    if (std::find(eos->begin(), eos->end(), id.get<int>()) == eos->end()) eos->push_back(id.get<int>());
  }
}

// The lists of extra special tokens transformers merges from special_tokens_map.json
// (additional_special_tokens; 5: extra_special_tokens).
bool is_token_list_key(const std::string& key) {
  return key == "additional_special_tokens" || key == "extra_special_tokens";
}

// tokenizer_config.json as written, {} where absent.
json plain_tokenizer_config(const std::string& dir) {
  const std::string file = dir + "/tokenizer_config.json";
  return std::filesystem::exists(file) ? read_json_file(file) : json::object();
}

// The config's list of extra special tokens with the map's appended, those it lacks (by text),
// as transformers merges additional_special_tokens (5: extra_special_tokens). Both lists.
json merged_token_list(const json& config_list, const json& map_list, const std::string& dir,
                       const std::string& key) {
  json merged = config_list;
  std::vector<std::string> texts;
  for (size_t i = 0; i < config_list.size(); ++i)
    texts.push_back(token_text(config_list[i], dir + "/tokenizer_config.json",
                               key + "[" + std::to_string(i) + "]"));
  for (size_t i = 0; i < map_list.size(); ++i) {
    const std::string text = token_text(map_list[i], dir + "/special_tokens_map.json",
                                        key + "[" + std::to_string(i) + "]");
    if (std::find(texts.begin(), texts.end(), text) == texts.end()) {
      merged.push_back(map_list[i]);
      texts.push_back(text);
    }
  }
  return merged;
}

// A config's settings with each token written as its text: tokenizer_config.json and
// special_tokens_map.json write one token as a string or as {"content": ...} with flags.
json token_texts(const json& config, const std::string& file) {
  json out = json::object();
  for (const auto& [key, value] : config.items()) {
    static const std::set<std::string> kTokens = {"bos_token", "eos_token", "unk_token",
                                                  "pad_token", "mask_token", "sep_token",
                                                  "cls_token"};
    if (kTokens.count(key)) {
      out[key] = token_text(value, file, key);
    } else if (is_token_list_key(key) && value.is_array()) {
      out[key] = json::array();
      for (size_t i = 0; i < value.size(); ++i)
        out[key].push_back(token_text(value[i], file, key + "[" + std::to_string(i) + "]"));
    } else {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace

json read_tokenizer_config(const std::string& dir, SpecialTokensMapKeys* from_map,
                           bool allow_unknown_keys) {
  json config = plain_tokenizer_config(dir);
  const std::string map_file = dir + "/special_tokens_map.json";
  if (!config.is_object() || config.contains("added_tokens_decoder") ||
      !std::filesystem::exists(map_file))
    return config;
  const json map = read_json_file(map_file);
  if (!map.is_object()) fail(map_file, "", "expected a JSON object");
  for (const auto& [key, value] : map.items()) {
    if (!is_known_config_key(key) && !allow_unknown_keys)
      fail(map_file, key, "a key kvbench neither reads nor knows to leave the ids unchanged "
                          "(kvbench list config-keys)");
    const bool merge = is_token_list_key(key) && value.is_array() && config.contains(key) &&
                       config[key].is_array();
    config[key] = merge ? merged_token_list(config[key], value, dir, key) : value;
    if (from_map) (merge ? from_map->merged : from_map->replaced).push_back(key);
  }
  return config;
}

bool special_tokens_map_changes_config(const std::string& dir) {
  try {
    const std::string file = dir + "/tokenizer_config.json";
    return token_texts(read_tokenizer_config(dir, nullptr, /*allow_unknown_keys=*/true), file) !=
           token_texts(plain_tokenizer_config(dir), file);
  } catch (const std::exception&) {
    return true;  // a file that does not parse: the loader says why
  }
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir, bool allow_unknown_keys) {
  const json tokenizer_json = read_json_file(dir + "/tokenizer.json");
  SpecialTokensMapKeys from_map;
  const json config = read_tokenizer_config(dir, &from_map, allow_unknown_keys);
  std::unique_ptr<Tokenizer> tokenizer =
      from_json(tokenizer_json, config, dir, allow_unknown_keys, from_map);
  const std::string generation_file = dir + "/generation_config.json";
  if (std::filesystem::exists(generation_file)) {
    add_generation_eos(generation_file, tokenizer->vocab_size(), allow_unknown_keys,
                       &tokenizer->eos_ids_, &tokenizer->unknown_config_keys_);
  }
  return tokenizer;
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const json& tokenizer_json,
                                                const json& tokenizer_config,
                                                const std::string& path_for_errors,
                                                bool allow_unknown_keys,
                                                const SpecialTokensMapKeys& from_map) {
  const std::string json_file = path_for_errors + "/tokenizer.json";
  const std::string config_file = path_for_errors + "/tokenizer_config.json";
  const ConfigFiles files{config_file, path_for_errors + "/special_tokens_map.json", from_map};
  if (!tokenizer_json.is_object()) fail(json_file, "", "expected a JSON object");
  if (!tokenizer_config.is_object()) fail(config_file, "", "expected a JSON object");

  tok::BpeParts parts{tok::BpeModel::from_json(tok::required(tokenizer_json, "model", json_file, ""),
                                               json_file, "model"),
                      {}, {}, {}};
  check_file_keys(tokenizer_json, json_file);
  const int added_count =
      tokenizer_json.contains("added_tokens") ? static_cast<int>(tokenizer_json["added_tokens"].size()) : 0;
  parts.added = tok::AddedTokens::from_json(tokenizer_json.value("added_tokens", json()),
                                            parts.model.size() + added_count, json_file);
  check_added_tokens(tokenizer_json, parts.model, json_file);  // after from_json's own checks
  parts.normalizer = tok::Normalizer::from_json(tokenizer_json.value("normalizer", json()), json_file);
  parts.decoder = tok::Decoder::from_json(tokenizer_json.value("decoder", json()), json_file);

  const json pre_tokenizer = tokenizer_json.value("pre_tokenizer", json());
  std::unique_ptr<tok::BpeTokenizer> tokenizer =
      uses_byte_level(pre_tokenizer)
          ? tok::make_byte_level_bpe(std::move(parts), pre_tokenizer, json_file)
          : tok::make_sentencepiece_bpe(std::move(parts), pre_tokenizer, json_file);

  std::vector<std::string> unknown =
      unknown_keys_of(tokenizer_config, config_file, allow_unknown_keys);
  refuse_unreproduced_settings(tokenizer_config, files);
  check_named_tokens(tokenizer_config, *tokenizer, files);
  SpecialIds ids = special_ids(*tokenizer, tokenizer_json, tokenizer_config, json_file, files);
  Tokenizer& base = *tokenizer;
  base.bos_id_ = ids.prefix.empty() ? -1 : ids.prefix[0];
  base.prefix_ids_ = std::move(ids.prefix);
  base.eos_ids_ = std::move(ids.eos);
  base.add_bos_ = ids.add_bos;
  base.add_eos_ = ids.add_eos;
  base.unknown_config_keys_ = std::move(unknown);
  // Absent: false, transformers' default since 4.45 and in 5 (older versions defaulted to true).
  base.clean_up_spaces_ =
      tok::optional_bool(tokenizer_config, "clean_up_tokenization_spaces", false,
                         files.of("clean_up_tokenization_spaces"), "");
  return tokenizer;
}

}  // namespace kvb
