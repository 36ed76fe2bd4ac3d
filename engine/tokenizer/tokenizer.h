// Tokenizers read from a Hugging Face tokenizer.json (+ tokenizer_config.json).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvb {

// The keys of a tokenizer config that special_tokens_map.json set (read_tokenizer_config): its
// value in place of the config's, or a list of the config's tokens and the map's merged.
struct SpecialTokensMapKeys {
  std::vector<std::string> replaced, merged;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> ids. `add_special`: a sequence as transformers encodes it with add_special_tokens,
  // BOS prepended where the tokenizer adds one (GLM-4's two tokens, [gMASK] <sop>) and EOS
  // appended where tokenizer_config.json's add_eos_token asks; without it, the text's ids alone.
  // Special/added tokens written literally in `text` (e.g. "<s>", "<|eot_id|>") map to their ids.
  virtual std::vector<int> encode(const std::string& text, bool add_special) const = 0;
  // Ids -> text; special tokens are skipped when `skip_special`; then, where
  // tokenizer_config.json's clean_up_tokenization_spaces is true, transformers' clean-up (" ." ->
  // ".", " n't" -> "n't", ...).
  virtual std::string decode(const std::vector<int>& ids, bool skip_special = true) const = 0;
  virtual int vocab_size() const = 0;
  int bos_id() const { return bos_id_; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  bool add_bos_by_default() const { return add_bos_; }
  // What encode(text, true) puts before the text's ids: BOS (GLM-4: two tokens), or nothing.
  std::vector<int> special_prefix() const { return add_bos_ ? prefix_ids_ : std::vector<int>(); }
  bool adds_eos() const { return add_eos_; }
  bool cleans_up_spaces() const { return clean_up_spaces_; }
  // tokenizer_config.json's keys kvbench does not know, let through by allow_unknown_keys.
  const std::vector<std::string>& unknown_config_keys() const { return unknown_config_keys_; }

  // Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json (with a legacy
  // special_tokens_map.json: read_tokenizer_config). Chooses the
  // SentencePiece-style or byte-level BPE implementation from the file's model/pre-tokenizer.
  // Throws InputError naming the file and field on anything malformed or unsupported, and on a
  // tokenizer_config.json key kvbench neither reads nor knows to be inert, unless
  // `allow_unknown_keys` (then listed in unknown_config_keys()).
  // Also adds generation_config.json's eos_token_id(s), when that file is present, to eos_ids().
  static std::unique_ptr<Tokenizer> load(const std::string& dir, bool allow_unknown_keys = false);
  // `path_for_errors` is the folder the two files come from: errors name
  // <path_for_errors>/tokenizer.json or <path_for_errors>/tokenizer_config.json, or
  // <path_for_errors>/special_tokens_map.json (both, for a merged list) for the keys in
  // `from_map` (read_tokenizer_config's).
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& tokenizer_json,
                                              const nlohmann::json& tokenizer_config,
                                              const std::string& path_for_errors,
                                              bool allow_unknown_keys = false,
                                              const SpecialTokensMapKeys& from_map = {});

 protected:
  int bos_id_ = -1;
  std::vector<int> prefix_ids_;  // what add_bos_ prepends: {bos_id_}, or a template's tokens
  std::vector<int> eos_ids_;  // tokenizer_config.json's eos_token first (what add_eos_ appends)
  bool add_bos_ = true;
  bool add_eos_ = false;
  bool clean_up_spaces_ = false;
  std::vector<std::string> unknown_config_keys_;
};

// `dir`/tokenizer_config.json ({} where absent) as transformers reads it: where that file has
// no added_tokens_decoder (written before transformers 4.34) and `dir` holds a
// special_tokens_map.json, the map's keys replace the config's, but for a list of extra special
// tokens in both, which gets the map's tokens it lacks appended (transformers' legacy path; a
// config with added_tokens_decoder makes it ignore the map). `from_map` (nullable) gets which
// keys the map set. A map key kvbench does not know (tokenizer_config_key_table) is refused, an
// InputError naming the map and the key, unless `allow_unknown_keys`.
nlohmann::json read_tokenizer_config(const std::string& dir,
                                     SpecialTokensMapKeys* from_map = nullptr,
                                     bool allow_unknown_keys = false);
// Whether special_tokens_map.json makes read_tokenizer_config(dir) name other tokens or settings
// than tokenizer_config.json as written (tokens compared by their text, however each file
// writes them; true where a file does not parse).
bool special_tokens_map_changes_config(const std::string& dir);

// tokenizer_config.json's keys kvbench reads or knows to leave a text's ids unchanged, each with
// what kvbench does with it (kvbench list config-keys); any other key is refused unless let
// through (Tokenizer::load's allow_unknown_keys).
const std::vector<std::pair<std::string, std::string>>& tokenizer_config_key_table();

// Built-in chat templates, each one family's single-user-turn prompt as a reference script
// writes it (the model's own template: apply_model_chat_template): chat_template_names().
// apply_chat_template("none", s) == s. "llama3" is Llama-3's template without its trim of the
// message (KVCache-Factory's written form); "llama3_1" Llama-3.1's own (its system block and
// date, the message trimmed as Jinja's trim does). Not detected: "vicuna" (FastChat's
// vicuna_v1.1), "llama2_longbench" (LongBench pred.py's "[INST]s[/INST]"), "llama3_snapkv"
// (SnapKV's Llama-3 form, vllm-kvcompress's LongBench runner), "llama3_pqcache" /
// "llama3_1_pqcache" (PQCache's: the model's own with a system message); the last three write
// their BOS out. Unknown name: InputError.
std::string apply_chat_template(const std::string& template_name, const std::string& user_message);
// Where `prompt` begins in `wrapped`, a chat template's output around it: the position of its
// first byte, also where the template trimmed its ends (the trimmed text found, less the bytes
// trimmed in front: an offset into the prompt past them maps to one into `wrapped`); npos
// where neither is found.
size_t wrapped_prompt_start(const std::string& wrapped, const std::string& prompt);
// What apply_chat_template(template_name, m) puts before and after the message m (a message
// with whitespace at an end loses it in the templates that trim).
struct ChatTemplateParts {
  std::string before, after;
};
ChatTemplateParts chat_template_parts(const std::string& template_name);
// InputError naming `where` when the text `template_name` puts around a message holds a marker
// its family's tokenizers hold as one special token (llama3's <|eot_id|>, chatml's
// <|im_start|>, glm4's <|user|>) and `tokenizer` has no such token: the model would read it
// spelt out as text, a template applied to a model not of its family.
void check_chat_template_tokens(const std::string& template_name, const Tokenizer& tokenizer,
                                const std::string& where);
// The names apply_chat_template knows, "none" first.
const std::vector<std::string>& chat_template_names();
// The family of tokenizer_config.json's chat_template, from its markers: a built-in template's
// name ("llama3_1" also for Llama-3.2 and 3.3, whose templates write the same), "none" when
// absent or null, "other" for a template of no known family. An InputError where the value is
// no template (neither a text nor a list holding a "default" one).
std::string detect_chat_template(const nlohmann::json& tokenizer_config);
// A special token's text as tokenizer_config.json gives it ("text" or {"content": "text"});
// none for any other value.
std::optional<std::string> special_token_text(const nlohmann::json& value);
// A Sample::auto_chat_as value: the model's own template rendered as text and encoded with
// special tokens, as a script calling apply_chat_template(tokenize=False) and then the
// tokenizer does: the BOS it writes and the tokenizer's both (two on Llama-3).
inline constexpr const char* kOwnTemplateAsText = "own_as_text";
// The model's own chat template rendered for one user message as transformers'
// apply_chat_template(messages, add_generation_prompt=True, tokenize=False) renders it
// (render_jinja: Jinja2 with transformers' settings; tools and documents None; the special
// tokens tokenizer_config sets). An InputError naming `where` (the template's file and field)
// for a model without a template, or a template outside render_jinja's subset or that raises.
std::string render_model_chat_template(const nlohmann::json& tokenizer_config,
                                       const std::string& user_message, const std::string& where);
// render_model_chat_template's text less the tokenizer's BOS at its start (its text before BOS,
// as the built-in templates give theirs); an InputError also where it does not begin with that
// BOS. Encoded back with the BOS written before it and no special tokens added, it is
// apply_chat_template(..., tokenize=True)'s ids (the runner's encode_start).
std::string apply_model_chat_template(const nlohmann::json& tokenizer_config,
                                      const Tokenizer& tokenizer, const std::string& user_message,
                                      const std::string& where);

}  // namespace kvb
