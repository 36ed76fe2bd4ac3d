// Byte-level BPE (GPT-2, Llama 3, Qwen2): the text is split into words by a regex, each word's
// bytes are spelled in GPT-2's byte alphabet, and the merges run within each word.
#include "engine/tokenizer/byte_alphabet.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/split_regex.h"

namespace kvb::tok {
namespace {

struct PreTokenizeStep {
  enum class Kind { kSplit, kByteLevel } kind;
  SplitRegex regex = SplitRegex::kGpt2;  // kSplit, or kByteLevel with use_regex
  bool use_regex = false;                // kByteLevel
  bool add_prefix_space = false;         // kByteLevel
};

PreTokenizeStep parse_split(const nlohmann::json& split, const std::string& file,
                            const std::string& field) {
  const nlohmann::json& pattern = required(split, "pattern", file, field);
  if (!pattern.is_object() || !pattern.contains("Regex")) {
    fail(file, field + ".pattern", "only {\"Regex\": ...} patterns are supported");
  }
  const std::string regex = required_string(pattern, "Regex", file, field + ".pattern");
  const auto known = recognise_split_regex(regex);
  if (!known) {
    fail(file, field + ".pattern.Regex",
         "unsupported regex \"" + regex + "\" (known: the GPT-2, Llama 3 and Qwen2 patterns)");
  }
  const std::string behavior = optional_string(split, "behavior", "Isolated", file, field);
  if (behavior != "Isolated") {
    fail(file, field + ".behavior", "only \"Isolated\" is supported, got \"" + behavior + "\"");
  }
  if (optional_bool(split, "invert", false, file, field)) fail(file, field + ".invert", "not supported");
  return {PreTokenizeStep::Kind::kSplit, *known};
}

void parse_steps(const nlohmann::json& pre_tokenizer, const std::string& file,
                 const std::string& field, std::vector<PreTokenizeStep>* steps) {
  const std::string type = required_string(pre_tokenizer, "type", file, field);
  if (type == "Sequence") {
    const nlohmann::json& list = required(pre_tokenizer, "pretokenizers", file, field);
    if (!list.is_array()) fail(file, field + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_steps(list[i], file, field + ".pretokenizers[" + std::to_string(i) + "]", steps);
    }
  } else if (type == "Split") {
    steps->push_back(parse_split(pre_tokenizer, file, field));
  } else if (type == "ByteLevel") {
    PreTokenizeStep step{PreTokenizeStep::Kind::kByteLevel};
    step.use_regex = optional_bool(pre_tokenizer, "use_regex", true, file, field);
    step.add_prefix_space = optional_bool(pre_tokenizer, "add_prefix_space", false, file, field);
    steps->push_back(step);
  } else {
    fail(file, field + ".type", "unsupported pre-tokenizer \"" + type + "\"");
  }
}

std::vector<PreTokenizeStep> parse_pre_tokenizer(const nlohmann::json& pre_tokenizer,
                                                 const std::string& file) {
  std::vector<PreTokenizeStep> steps;
  parse_steps(pre_tokenizer, file, "pre_tokenizer", &steps);
  // The byte alphabet is applied once, after every split, so ByteLevel must come last.
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool last = i + 1 == steps.size();
    if ((steps[i].kind == PreTokenizeStep::Kind::kByteLevel) != last) {
      fail(file, "pre_tokenizer", "expected ByteLevel as the last (and only last) step");
    }
  }
  return steps;
}

std::vector<std::string> split_all(const std::vector<std::string>& pieces, SplitRegex regex) {
  std::vector<std::string> out;
  std::vector<std::string_view> parts;
  for (const std::string& piece : pieces) {
    parts.clear();
    split_with_regex(regex, piece, &parts);
    out.insert(out.end(), parts.begin(), parts.end());
  }
  return out;
}

class ByteLevelBpe : public BpeTokenizer {
 public:
  ByteLevelBpe(BpeParts parts, std::vector<PreTokenizeStep> steps)
      : BpeTokenizer(std::move(parts)), steps_(std::move(steps)) {}

 private:
  void encode_segment(const std::string& text, bool at_start,
                      std::vector<int>* out) const override {
    std::vector<std::string> words{text};
    for (const PreTokenizeStep& step : steps_) {
      if (step.kind == PreTokenizeStep::Kind::kSplit) {
        words = split_all(words, step.regex);
        continue;
      }
      if (step.add_prefix_space) {
        for (std::string& word : words) {
          if (word.empty() || word[0] != ' ') word.insert(0, " ");
        }
      }
      if (step.use_regex) words = split_all(words, step.regex);
    }
    std::string spelled;
    for (const std::string& word : words) {
      spelled.clear();
      for (unsigned char byte : word) spelled += byte_to_symbol(byte);
      model().encode_word(spelled, out);
    }
  }

  std::vector<PreTokenizeStep> steps_;
};

}  // namespace

std::unique_ptr<BpeTokenizer> make_byte_level_bpe(BpeParts parts,
                                                  const nlohmann::json& pre_tokenizer,
                                                  const std::string& file) {
  return std::make_unique<ByteLevelBpe>(std::move(parts), parse_pre_tokenizer(pre_tokenizer, file));
}

}  // namespace kvb::tok
