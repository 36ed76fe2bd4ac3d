#include "engine/tokenizer/normalizer.h"

#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/nfc.h"

namespace kvb::tok {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(text.substr(pos));
  return out;
}

Normalizer Normalizer::from_json(const nlohmann::json& normalizer, const std::string& file) {
  Normalizer result;
  if (!normalizer.is_null()) result.add(normalizer, file, "normalizer");
  return result;
}

void Normalizer::add(const nlohmann::json& normalizer, const std::string& file,
                     const std::string& field) {
  const std::string type = required_string(normalizer, "type", file, field);
  if (type == "Sequence") {
    const nlohmann::json& list = required(normalizer, "normalizers", file, field);
    if (!list.is_array()) fail(file, join_field(field, "normalizers"), "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      add(list[i], file, field + ".normalizers[" + std::to_string(i) + "]");
    }
  } else if (type == "Prepend") {
    steps_.push_back({Step::Kind::kPrepend, required_string(normalizer, "prepend", file, field), ""});
  } else if (type == "Replace") {
    const std::string pattern_field = join_field(field, "pattern");
    const nlohmann::json& pattern = required(normalizer, "pattern", file, field);
    if (!pattern.is_object() || !pattern.contains("String")) {
      fail(file, pattern_field, "only {\"String\": ...} patterns are supported");
    }
    Step step{Step::Kind::kReplace, required_string(pattern, "String", file, pattern_field),
              required_string(normalizer, "content", file, field)};
    if (step.text.empty()) fail(file, pattern_field + ".String", "empty");
    steps_.push_back(std::move(step));
  } else if (type == "NFC") {  // Qwen2 / Qwen3
    steps_.push_back({Step::Kind::kNfc, "", ""});
  } else {
    // NFD, NFKC, Lowercase, Strip, ... would silently change ids if skipped.
    fail(file, join_field(field, "type"), "unsupported normalizer \"" + type + "\"");
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Step::Kind::kReplace:
        out = replace_all(out, step.text, step.replacement);
        break;
      case Step::Kind::kNfc:
        out = unicode::nfc(out);
        break;
    }
  }
  return out;
}

}  // namespace kvb::tok
