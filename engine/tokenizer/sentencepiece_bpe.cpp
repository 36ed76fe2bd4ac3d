// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama, stories260K): no pre-tokenizer, so the
// merges run over each whole normalised stretch between added tokens ("▁" marks the spaces).
// Files written before tokenizers 0.14 express the "▁" handling as a Metaspace pre-tokenizer,
// which may also split the text into words, each starting at a "▁".
#include <optional>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/normalizer.h"

namespace kvb::tok {
namespace {

struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement;
  Prepend prepend;
  bool split;
};

std::optional<Metaspace> parse_metaspace(const nlohmann::json& pre_tokenizer,
                                         const std::string& file) {
  if (pre_tokenizer.is_null()) return std::nullopt;
  const std::string field = "pre_tokenizer";
  const std::string type = required_string(pre_tokenizer, "type", file, field);
  if (type != "Metaspace") {
    fail(file, field + ".type",
         "unsupported pre-tokenizer \"" + type + "\" for a tokenizer without ByteLevel");
  }
  Metaspace m;
  m.replacement = optional_string(pre_tokenizer, "replacement", "\u2581", file, field);
  if (m.replacement.empty()) fail(file, field + ".replacement", "empty");
  const bool legacy_add_prefix = optional_bool(pre_tokenizer, "add_prefix_space", true, file, field);
  const std::string scheme = optional_string(pre_tokenizer, "prepend_scheme",
                                             legacy_add_prefix ? "always" : "never", file, field);
  if (scheme == "always") {
    m.prepend = Metaspace::Prepend::kAlways;
  } else if (scheme == "first") {
    m.prepend = Metaspace::Prepend::kFirst;
  } else if (scheme == "never") {
    m.prepend = Metaspace::Prepend::kNever;
  } else {
    fail(file, field + ".prepend_scheme", "expected always, first or never, got \"" + scheme + "\"");
  }
  m.split = optional_bool(pre_tokenizer, "split", true, file, field);
  return m;
}

class SentencePieceBpe : public BpeTokenizer {
 public:
  SentencePieceBpe(BpeParts parts, std::optional<Metaspace> metaspace)
      : BpeTokenizer(std::move(parts)), metaspace_(std::move(metaspace)) {}

 private:
  void encode_segment(const std::string& text, bool at_start,
                      std::vector<int>* out) const override {
    if (!metaspace_) {
      model().encode_word(text, out);
      return;
    }
    const std::string& mark = metaspace_->replacement;
    std::string marked = replace_all(text, " ", mark);
    const bool prepend = metaspace_->prepend == Metaspace::Prepend::kAlways ||
                         (metaspace_->prepend == Metaspace::Prepend::kFirst && at_start);
    if (prepend && marked.compare(0, mark.size(), mark) != 0) marked.insert(0, mark);
    if (!metaspace_->split) {
      model().encode_word(marked, out);
      return;
    }
    // Words start at each mark: "▁a▁▁b" -> "▁a", "▁", "▁b".
    size_t start = 0;
    for (size_t hit = marked.find(mark, mark.size()); hit != std::string::npos;
         hit = marked.find(mark, hit + mark.size())) {
      if (hit > start) model().encode_word(std::string_view(marked).substr(start, hit - start), out);
      start = hit;
    }
    model().encode_word(std::string_view(marked).substr(start), out);
  }

  std::optional<Metaspace> metaspace_;
};

}  // namespace

std::unique_ptr<BpeTokenizer> make_sentencepiece_bpe(BpeParts parts,
                                                     const nlohmann::json& pre_tokenizer,
                                                     const std::string& file) {
  return std::make_unique<SentencePieceBpe>(std::move(parts), parse_metaspace(pre_tokenizer, file));
}

}  // namespace kvb::tok
