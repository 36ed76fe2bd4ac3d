// tokenizer.json's "normalizer": the text rewrites applied to each stretch of input between
// added tokens (SentencePiece-style: Prepend "▁", Replace " " -> "▁"; Qwen2 / Qwen3: NFC).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kvb::tok {

class Normalizer {
 public:
  // `normalizer` may be null (identity). Supported: Sequence, Prepend, Replace with a String
  // pattern, and NFC (Unicode canonical composition, nfc.h).
  static Normalizer from_json(const nlohmann::json& normalizer, const std::string& file);

  std::string apply(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kPrepend, kReplace, kNfc } kind;
    std::string text;         // what to prepend, or what to replace (kNfc: unused)
    std::string replacement;  // kReplace only
  };
  void add(const nlohmann::json& normalizer, const std::string& file, const std::string& field);

  std::vector<Step> steps_;
};

// Replaces every occurrence of `from` (non-empty) in `text` by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace kvb::tok
