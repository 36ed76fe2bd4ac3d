// What the SentencePiece-style and the byte-level BPE tokenizers share: added tokens matched
// first, the normaliser, the BPE model and the decoder. Subclasses only turn a normalised
// stretch of text into BPE words.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb::tok {

struct BpeParts {
  BpeModel model;
  AddedTokens added;
  Normalizer normalizer;
  Decoder decoder;
};

class BpeTokenizer : public Tokenizer {
 public:
  std::vector<int> encode(const std::string& text, bool add_special) const override;
  std::string decode(const std::vector<int>& ids, bool skip_special = true) const override;
  int vocab_size() const override;
  // The id of a token (added tokens first), or -1.
  int find_token(std::string_view token) const;

 protected:
  explicit BpeTokenizer(BpeParts parts) : parts_(std::move(parts)) {}
  const BpeModel& model() const { return parts_.model; }

 private:
  // Appends the ids of one normalised stretch of input between added tokens; `at_start` when it
  // begins the input (Metaspace's prepend_scheme "first").
  virtual void encode_segment(const std::string& text, bool at_start,
                              std::vector<int>* out) const = 0;

  BpeParts parts_;
};

// The two implementations; each parses its own pre_tokenizer (`pre_tokenizer` may be null).
std::unique_ptr<BpeTokenizer> make_sentencepiece_bpe(BpeParts parts,
                                                     const nlohmann::json& pre_tokenizer,
                                                     const std::string& file);
std::unique_ptr<BpeTokenizer> make_byte_level_bpe(BpeParts parts,
                                                  const nlohmann::json& pre_tokenizer,
                                                  const std::string& file);

}  // namespace kvb::tok
