// Tokenizers read from a Hugging Face tokenizer.json (+ tokenizer_config.json).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kvb {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> ids, with BOS prepended when `add_bos` (and the tokenizer has one; GLM-4's
  // tokenizer prepends two special tokens, [gMASK] <sop>).
  // Special/added tokens written literally in `text` (e.g. "<s>", "<|eot_id|>") map to their ids.
  virtual std::vector<int> encode(const std::string& text, bool add_bos) const = 0;
  // Ids -> text; special tokens are skipped when `skip_special`.
  virtual std::string decode(const std::vector<int>& ids, bool skip_special = true) const = 0;
  virtual int vocab_size() const = 0;
  int bos_id() const { return bos_id_; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  bool add_bos_by_default() const { return add_bos_; }

  // Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json. Chooses the
  // SentencePiece-style or byte-level BPE implementation from the file's model/pre-tokenizer.
  // Throws InputError naming the file and field on anything malformed or unsupported.
  // Also adds generation_config.json's eos_token_id(s), when that file is present, to eos_ids().
  static std::unique_ptr<Tokenizer> load(const std::string& dir);
  // `path_for_errors` is the folder the two files come from: errors name
  // <path_for_errors>/tokenizer.json or <path_for_errors>/tokenizer_config.json.
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& tokenizer_json,
                                              const nlohmann::json& tokenizer_config,
                                              const std::string& path_for_errors);

 protected:
  int bos_id_ = -1;
  std::vector<int> prefix_ids_;  // what add_bos prepends: {bos_id_}, or a template's tokens
  std::vector<int> eos_ids_;
  bool add_bos_ = true;
};

// Built-in chat templates (no Jinja). Names: "none", "llama2", "llama3", "mistral", "qwen2",
// "chatml". apply_chat_template("none", s) == s. Unknown name: InputError.
std::string apply_chat_template(const std::string& template_name, const std::string& user_message);
// Guesses the template from tokenizer_config.json's chat_template text ("none" when absent).
// A chat_template of none of the known families is an InputError (name one explicitly).
std::string detect_chat_template(const nlohmann::json& tokenizer_config);

}  // namespace kvb
